"""mlpsych in the browser, from a checkout: `streamlit run app.py` (installed: `mlpsych app`).

The page is :mod:`mlpsych.app.page`, which ships in the package; this file only runs it.
"""

from mlpsych.app.page import main

main()
