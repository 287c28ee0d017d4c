"""mlpsych in the browser: `streamlit run app.py`.

A thin page over :mod:`mlpsych.app.logic`: papers in (upload or a folder on this machine), a question template
(from the library, a file, or made in a form), a preset, a run with progress and a measured time estimate, then
the answers with evidence and page, filters, and XLSX / CSV downloads. The cache is the CLI's, so a rerun is
instant.
"""

from __future__ import annotations

import logging
from pathlib import Path

import streamlit as st

from mlpsych.app import logic
from mlpsych.cache import default_cache_dir

logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

st.set_page_config(page_title="mlpsych: answers from papers", page_icon="📄", layout="wide")
state = st.session_state


# -- sidebar: questions override, preset, device, cache --------------------------------------------------------

def sidebar() -> dict:
    side = st.sidebar
    side.header("Settings")
    presets = logic.preset_choices()
    preset = side.radio("Preset", list(presets), key="preset",
                        format_func=lambda n: {"paper": "paper: faithful to the paper (GPU)",
                                               "fast": "fast: quick on a laptop CPU"}.get(n, n),
                        help="\n\n".join(f"**{n}**: {d}" for n, d in presets.items()))
    side.caption(presets[preset])
    device = side.selectbox("Device", ["auto", "cpu", "cuda", "mps"], key="device",
                            help="auto takes a GPU when there is one")
    normalize = side.checkbox("Clean answer lists with the LLM", value=True, key="normalize",
                              help="A large language model (LLM, a text-writing model) turns the extracted snippets "
                                   "into a tidy list. Slow without a GPU; off, you get the snippets themselves.")
    max_sub = side.number_input("Follow-up questions per paper (0 = template's)", min_value=0, max_value=100,
                                value=0, key="max_sub",
                                help="Multi-hop questions ask one follow-up per answer of an earlier question "
                                     "(\"What was random forest used for?\"); this caps how many.")
    side.divider()
    side.subheader("Offline / local models")
    question_file = side.text_input(
        "Question file path (overrides the template)", key="question_file",
        help="A question file whose models are folders on this machine, e.g. the one written by "
             "`mlpsych dev tiny-models /tmp/tiny`.")
    cache_dir = side.text_input("Cache folder (shared with the command line)", value=str(default_cache_dir()),
                                key="cache_dir")
    side.caption(f"Uploads: up to {logic.MAX_UPLOAD_MB} MB per file; kept in a temporary folder on this "
                 "machine for this session only.")
    return {"preset": preset, "device": device, "normalize": normalize, "max_sub": int(max_sub) or None,
            "question_file": question_file.strip(), "cache_dir": cache_dir.strip() or None}


# -- papers ------------------------------------------------------------------------------------------------------

def papers_section() -> list[Path] | list[tuple[str, str, bytes]] | None:
    """The papers to read: a folder's files, uploads as ("upload", name, bytes) to save at run time, or None."""
    st.subheader("1 · Papers")
    source = st.radio("Where are the papers?", ["Upload files", "A folder on this machine"], horizontal=True,
                      key="paper_source")
    if source == "Upload files":
        files = st.file_uploader(
            f"Drop papers here (PDF, TXT, DOCX, HTML; many at once; up to {logic.MAX_UPLOAD_MB} MB each)",
            type=logic.upload_suffixes(), accept_multiple_files=True, key="uploads")
        if not files:
            st.info("Upload one or more papers, or switch to a folder on this machine.")
            return None
        st.caption(f"{len(files)} file(s) selected")
        return [("upload", f.name, f.getvalue()) for f in files]  # saved when the run starts
    folder = st.text_input("Folder with the papers", key="paper_folder", placeholder="/home/me/papers")
    if not folder.strip():
        return None
    try:
        papers = logic.papers_in_folder(folder)
    except logic.AppInputError as error:
        st.error(str(error))
        return None
    st.caption(f"{len(papers)} paper(s): " + ", ".join(p.name for p in papers[:12])
               + (" …" if len(papers) > 12 else ""))
    return papers


# -- questions ---------------------------------------------------------------------------------------------------

def questions_section(question_file: str):
    st.subheader("2 · Questions")
    if question_file:
        source = question_file
        st.caption(f"Questions from the file in the sidebar: `{question_file}`")
    else:
        choices = logic.template_choices()
        label = st.selectbox("Question template", list(choices), key="template",
                             help="The library's templates and the ones you saved below.")
        source = choices[label]
    try:
        questions = logic.load_questions(source)
    except logic.AppInputError as error:
        st.error(str(error))
        return None
    if questions.description:
        st.caption(questions.description)
    labels = {q.id: logic.question_label(q) for q in questions.in_run_order()}
    picked = st.multiselect("Questions to answer (empty = all)", list(labels), format_func=labels.get,
                            key="picked_questions")
    if any(questions.get(q).experimental for q in (picked or labels)):
        st.caption("Questions marked *experimental* have not been measured on hand-coded papers yet: "
                   "check their answers before relying on them.")
    custom_questions_form(questions)
    return questions.select(picked) if picked else questions


def custom_questions_form(current) -> None:
    with st.expander("Add or edit your own questions (saved as a reusable template file)"):
        folder = logic.templates_dir()
        st.caption(f"Saved in `{folder}`; they appear in the template list and work with "
                   "`mlpsych run --questions FILE`.")
        ids = ["(new question)"] + [q.id for q in current.questions]
        start = st.selectbox("Start from", ids, key="edit_from")
        base = current.get(start) if start != "(new question)" else None
        with st.form("question_form"):
            name = st.text_input("Template name", value="my-questions", key="form_template")
            qid = st.text_input("Short id (letters, digits, _ . -)", value=base.id if base else "", key="form_id")
            text = st.text_area("Question", value=base.text if base else "", key="form_text",
                                help="Asked of every paper, as you would ask a colleague. For a follow-up "
                                     "question, put __PLACEHOLDER__ where the earlier answer goes.")
            kinds = ["entity", "phrase", "number"]
            kind = st.selectbox("Kind of answer", kinds, index=kinds.index(base.kind) if base else 0,
                                key="form_kind", help="entity: names (methods, countries); phrase: a short "
                                "passage (a research question); number: a count (sample size)")
            models = st.text_area(
                "Models (one per line)", key="form_models",
                value="\n".join(base.models) if base else "deepset/deberta-v3-large-squad2",
                help="Reading-comprehension models tuned on SQuAD 2.0 (a question-answering data set): Hub ids "
                     "or folders on this machine.")
            top_k = st.number_input("Answers kept per model", 1, 200, value=base.top_k if base else 5,
                                    key="form_top_k")
            allow_empty = st.checkbox("'No answer' is a valid answer", value=base.allow_empty if base else True,
                                      key="form_allow_empty")
            merge = st.checkbox("Merge overlapping answers", value=base.merge if base else True, key="form_merge")
            bridge = st.text_input("Follow-up of question (id, optional)",
                                   value=(base.bridge_from or "") if base else "", key="form_bridge")
            saved = st.form_submit_button("Save question")
        if saved:
            entry = logic.question_fields(id=qid, text=text, kind=kind, models=models, top_k=int(top_k),
                                          allow_empty=allow_empty, merge=merge, bridge_from=bridge)
            try:
                path = logic.template_path(name, folder)
                result = logic.save_question(entry, path)
            except logic.AppInputError as error:
                st.error(f"Not saved: {error}")
            else:  # rerun so the template list above shows the new file
                state.flash = (f"Saved {entry['id']} in {path} ({len(result.questions)} question(s)); pick "
                               f"'{path.stem} (mine)' in the template list.")
                st.rerun()
        if state.get("flash"):
            st.success(state.pop("flash"))
        edit_yaml(current)


def edit_yaml(current) -> None:
    st.markdown("**Or edit a whole template as text** (YAML)")
    text = st.text_area("Template", value=logic.template_yaml(current), height=240, key="yaml_text")
    name = st.text_input("Save as", value=f"{current.name or 'my-questions'}-edited", key="yaml_name")
    check, save = st.columns(2)
    if check.button("Check", key="yaml_check"):
        try:
            checked = logic.check_template_text(text, name)
            st.success(f"Loads fine: {len(checked.questions)} question(s).")
        except logic.AppInputError as error:
            st.error(str(error))
    if save.button("Save template", key="yaml_save"):
        try:
            path = logic.template_path(name)
            logic.save_template_text(text, path)
        except logic.AppInputError as error:
            st.error(f"Not saved: {error}")
        else:
            state.flash = f"Saved {path}; pick '{path.stem} (mine)' in the template list."
            st.rerun()


# -- run ---------------------------------------------------------------------------------------------------------

def run_section(papers, questions, options: dict) -> None:
    st.subheader("3 · Run")
    ready = papers is not None and questions is not None
    if not st.button("Run", type="primary", disabled=not ready, key="run"):
        return
    try:
        run_questions, settings = logic.build_run(questions, options["preset"], device=options["device"],
                                                  normalize=options["normalize"],
                                                  max_sub_questions=options["max_sub"])
    except logic.AppInputError as error:
        st.error(str(error))
        return
    if papers and isinstance(papers[0], tuple):  # uploads: save them now under safe names
        if "upload_root" not in state:
            state.upload_root = logic.new_upload_folder()
        folder = Path(state.upload_root) / f"run-{state.get('run_count', 0) + 1}"
        saved = logic.save_uploads([(name, data) for _, name, data in papers], folder)
        for problem in saved.refused:
            st.warning(problem)
        if not saved.paths:
            st.error("None of the uploaded files can be read.")
            return
        papers = saved.paths
    state.run_count = state.get("run_count", 0) + 1
    bar = st.progress(0.0, text="Reading papers…")
    line = st.empty()
    tracker: dict = {}

    def on_documents(documents) -> None:
        readable = sum(1 for d in documents if d.ok and d.text.strip())
        tracker["t"] = logic.ProgressTracker(logic.plan_steps(run_questions, settings, readable))
        bar.progress(0.0, text=f"{readable} of {len(documents)} paper(s) read; answering questions…")

    def on_progress(stage: str, done: int, total: int) -> None:
        t = tracker["t"]
        t.update(stage, done, total)
        bar.progress(t.fraction(), text=t.describe())
        line.caption(f"Stage {logic.short_stage(stage)} · paper {done} of {total}")

    with st.spinner("Running…"):
        outcome = logic.run_papers(papers, run_questions, settings, cache_dir=options["cache_dir"],
                                   on_progress=on_progress, on_documents=on_documents)
    if "t" in tracker:
        tracker["t"].finish()
    bar.progress(1.0, text=f"Finished in {logic.format_seconds(outcome.seconds)}")
    line.empty()
    state.outcome = outcome
    state.downloads = None
    for key in ("filter_q", "filter_p", "filter_text"):  # a new run starts unfiltered
        state.pop(key, None)
    if outcome.result is not None:
        state.downloads = {suffix: logic.download_bytes(outcome.result, suffix) for suffix in (".xlsx", ".csv")}


# -- results -----------------------------------------------------------------------------------------------------

def results_section() -> None:
    outcome = state.get("outcome")
    if outcome is None:
        return
    st.subheader("4 · Results")
    if outcome.error:
        st.error(f"The run could not finish: {outcome.error}")
    result = outcome.result
    if result is None:
        return
    info = result.info
    hits, misses = info.get("cache_hits", 0), info.get("cache_misses", 0)
    st.caption(f"{len(result.documents)} paper(s) in {logic.format_seconds(outcome.seconds)}; "
               f"cache: {hits} reused, {misses} computed ({info.get('cache', '')})")
    for warning in info.get("warnings", []):
        st.warning(warning)
    status = logic.status_table(result)
    problems = status[status["status"] != "ok"]
    for _, row in problems.iterrows():
        st.warning(f"{row['paper']} ({row['source_file']}): {row['status']}")
    with st.expander("Papers", expanded=bool(len(problems))):
        st.dataframe(status, hide_index=True, width="stretch")
    table = logic.results_table(result)
    left, middle, right = st.columns(3)
    questions = left.multiselect("Question", sorted(table["question_id"].unique()), key="filter_q")
    papers = middle.multiselect("Paper", list(status["paper"]), key="filter_p")
    text = right.text_input("Contains", key="filter_text")
    shown = logic.filter_results(table, questions, papers, text)
    st.caption(f"{len(shown)} of {len(table)} answers")
    st.dataframe(shown, hide_index=True, width="stretch", key="results_table",
                 column_config={"evidence": st.column_config.TextColumn("evidence", width="large"),
                                "answer": st.column_config.TextColumn("answer", width="medium"),
                                "score": st.column_config.NumberColumn("score", format="%.3f")})
    downloads = state.get("downloads") or {}
    one, two = st.columns(2)
    if ".xlsx" in downloads:
        one.download_button("Download XLSX (all sheets, coder columns)", downloads[".xlsx"], "results.xlsx",
                            mime="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                            key="download_xlsx")
    if ".csv" in downloads:
        two.download_button("Download CSV (answers)", downloads[".csv"], "results.csv", mime="text/csv",
                            key="download_csv")


def main() -> None:
    st.title("mlpsych: answers from papers")
    st.write("Upload papers, choose questions, and get a spreadsheet with every answer, the sentence it comes "
             "from and its page, ready for coding. Answers come from reading-comprehension models that copy "
             "the answer out of the paper; check them against the evidence.")
    options = sidebar()
    papers = papers_section()
    questions = questions_section(options["question_file"])
    run_section(papers, questions, options)
    results_section()


main()
