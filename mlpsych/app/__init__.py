"""The Streamlit app's logic as plain functions (``logic``); the page itself is ``app.py`` at the repository root."""
