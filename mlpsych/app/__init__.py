"""The Streamlit app as plain, testable modules; the page itself is ``app.py`` at the repository root.

``logic`` (uploads, question templates and the form, presets), ``preflight`` (are the run's models here?),
``runner`` (one run, as a record), ``estimate`` (progress and time left from the pipeline's events), ``results``
(the tables, filters and downloads), ``demo`` (the tiny models as a way forward).
"""
