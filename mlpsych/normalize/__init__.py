"""Normalization (the paper's RAG step): an LLM turns a question's extractive answers into a clean list.

``answers`` builds the prompts and turns the LLM's items into grounded answers (``grounding``); ``llm`` runs the
model and parses its output (``listparse``, a bounded literal parser: output is data, never code); ``cache`` puts
the runner behind the result cache, so the LLM is loaded only for prompts not seen before.
"""
