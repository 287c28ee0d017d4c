"""Scoring answers: the paper's metrics (``metrics``), a run against gold answers (``evaluate``), and agreement of
human coders with the answers and with each other (``agree``)."""
