"""mlpsych in the browser: `mlpsych app` runs this file with Streamlit (in a checkout, `streamlit run app.py` does).

It ships inside the package, so that an installed mlpsych has its page. A thin page over :mod:`mlpsych.app`: papers
in (upload or a folder on this machine), a question template (from the library, a file, or made in a form), a
preset, a run that checks its models first and shows progress measured from the pipeline's events, then one row per
paper, the answers with evidence and page, filters, and downloads of all or the filtered rows. The cache is the
CLI's, so a rerun is instant.
"""

from __future__ import annotations

import sys

from mlpsych.app import leave_sys_path

# First thing, on every run: Streamlit runs this file with its folder, mlpsych/app/, first on sys.path (bootstrap's
# _fix_sys_path when the server starts, the script runner's modified_sys_path around each run), which made the
# folder's `logic`, `results`, `review`, `runner` ... top-level modules, shadowing installed packages of those names
# for everything imported in the page's process. The page imports them as `mlpsych.app.*`, with no such entry.
leave_sys_path(sys.path, __file__)

import logging  # noqa: E402
from collections.abc import Callable  # noqa: E402
from contextlib import ExitStack  # noqa: E402
from pathlib import Path  # noqa: E402

import streamlit as st  # noqa: E402
from streamlit.runtime.scriptrunner import add_script_run_ctx  # noqa: E402

from mlpsych import preflight  # noqa: E402
from mlpsych.answers import AnswerStage  # noqa: E402
from mlpsych.app import demo, logic, reread, results, review, runner  # noqa: E402
from mlpsych.errors import UserError  # noqa: E402
from mlpsych.estimate import LiveEstimate, ProgressTracker, format_seconds  # noqa: E402
from mlpsych.questions import QUESTION_KINDS  # noqa: E402
from mlpsych.cache import default_cache_dir  # noqa: E402

logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

state = st.session_state


# -- sidebar: questions override, preset, device, cache --------------------------------------------------------

def sidebar() -> dict:
    side = st.sidebar
    side.header("Settings")
    presets = logic.preset_choices()
    gpu = logic.has_accelerator()
    preset = side.radio("Preset", list(presets), key="preset", format_func=lambda n: logic.preset_label(n, gpu),
                        help="\n\n".join(f"**{n}**: {d}" for n, d in presets.items()))
    side.caption(presets[preset])
    device = side.selectbox("Device", ["auto", "cpu", "cuda", "mps"], key="device",
                            help="auto takes a GPU when there is one")
    if "normalize" not in state:  # on by default only where it runs in reasonable time
        state.normalize = logic.has_accelerator()
    normalize = side.checkbox("Clean answer lists with the LLM", key="normalize",
                              help="A large language model (LLM, a text-writing model) turns the extracted snippets "
                                   "into a tidy list. Slow without a GPU; off, you get the snippets themselves.")
    if not normalize and not logic.has_accelerator():
        side.caption(logic.LLM_OFF_NOTE)
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
    small_reader = side.text_input(
        "Small reader of the fast preset (Hub id or folder)", value=logic.FAST_SMALL_READER, key="small_reader",
        help="The fast preset's small SQuAD2 reader reads every window first; the question's reader then reads "
             "only where its answers are. A folder on this machine works offline.")
    cache_dir = side.text_input("Cache folder (shared with the command line)", value=str(default_cache_dir()),
                                key="cache_dir")
    side.caption(f"Uploads: up to {logic.MAX_UPLOAD_MB} MB per file; kept in a temporary folder on this "
                 "machine for this session only.")
    return {"preset": preset, "device": device, "normalize": normalize, "max_sub": int(max_sub) or None,
            "question_file": question_file.strip(), "cache_dir": cache_dir.strip() or None,
            "small_reader": small_reader.strip() or None}


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
        st.error(results.plain(error))
        return None
    st.caption(f"{len(papers)} paper(s): " + ", ".join(results.literal(p.name) for p in papers[:12])
               + (" …" if len(papers) > 12 else ""))
    return papers


# -- questions ---------------------------------------------------------------------------------------------------

def questions_section(question_file: str):
    st.subheader("2 · Questions")
    choices = logic.template_choices()
    if question_file:  # the sidebar's file comes first; the templates stay one click away
        choices = {f"{Path(question_file).name} (question file in the sidebar)": question_file, **choices}
    if state.get("template") not in choices or question_file != state.get("question_file_shown"):
        state.template = next(iter(choices))  # a newly given question file is the one used
        state.question_file_shown = question_file
    label = st.selectbox("Question template", list(choices), key="template",
                         help="The library's templates, the ones you saved below, and the sidebar's file.")
    try:
        questions = logic.load_questions(choices[label])
    except logic.AppInputError as error:
        st.error(results.plain(error))
        return None
    from_file = choices[label] == question_file
    if from_file or questions.description:  # what the chosen template is, and where it comes from
        where = f"From the question file set in the sidebar ({question_file}). " if from_file else ""
        st.caption(results.plain(where + (questions.description or "")))
    typed = state.get("typed_questions", {}).get(choices[label], [])
    for entry in typed:
        questions = logic.with_question(questions, entry)
    saved = state.get("typed_saved", {}).get(choices[label], {})  # id -> the file it was saved in since
    if any(e["id"] not in saved for e in typed):
        st.caption("Also asked in this run (not saved): "
                   + results.plain(", ".join(e["id"] for e in typed if e["id"] not in saved)))
    if saved:
        st.caption("Also asked in this run: "
                   + results.plain(", ".join(f"{q} (saved in {name})" for q, name in saved.items())))
    labels = {q.id: logic.question_label(q) for q in questions.in_run_order()}
    state.picked_questions = [q for q in state.get("picked_questions", []) if q in labels]
    picked = st.multiselect("Questions to answer (empty = all)", list(labels), format_func=labels.get,
                            key="picked_questions", placeholder=f"All {len(labels)} questions of the template")
    if any(questions.get(q).experimental for q in (picked or labels)):
        st.caption("Questions marked *experimental* have not been measured on hand-coded papers yet: "
                   "check their answers before relying on them.")
    custom_questions_form(questions, choices[label])
    return questions.select(picked) if picked else questions


def fill_form(current) -> None:
    """'Start from' changed: every field of the form takes the chosen question's value."""
    start = state.edit_from
    base = current.get(start) if start != NEW else None
    state.update(logic.form_values(base, state.get("form_models_offered", [])))


NEW = "(new question)"


def custom_questions_form(current, source: str) -> None:
    with st.expander("Add or edit your own questions (saved as a reusable template file)"):
        folder = logic.templates_dir()
        st.caption(f"Saved in `{folder}`; they appear in the template list and work with "
                   "`mlpsych run --questions FILE`.")
        template_models = [m for q in current.questions for m in q.models]
        here = preflight.models_here(template_models)
        state.form_models_offered = [*here, *template_models]  # a new question starts with a model that is here
        ids = [NEW] + [q.id for q in current.questions]
        if state.get("edit_from") not in ids:
            state.edit_from = NEW
        if "form_id" not in state or state.get("form_source") != source:
            state.form_source = source
            fill_form(current)
        start = st.selectbox("Start from", ids, key="edit_from", on_change=fill_form, args=(current,),
                     help="Fills the form with a question of the template, to change it or save a variant.")
        st.caption("Models on this machine: " + (results.plain(", ".join(here)) if here
                                                 else "none found (Hub ids are downloaded on the first run)"))
        with st.form("question_form"):
            name = st.text_input("Template name", value="my-questions", key="form_template")
            st.text_input("Short name (id: letters, digits, _ . -)", key="form_id")
            st.text_area("Question", key="form_text",
                         help="Asked of every paper, as you would ask a colleague. For a follow-up "
                              "question, put __PLACEHOLDER__ where the earlier answer goes.")
            st.selectbox("Kind of answer", list(QUESTION_KINDS), key="form_kind",
                         help="entity: names (methods, countries); phrase: a short passage (a research question); "
                              "number: a count (sample size)")
            st.text_area("Models (one per line)", key="form_models",
                         help="Reading-comprehension models tuned on SQuAD 2.0 (a question-answering data set): "
                              "Hub ids or folders on this machine; those on this machine are listed above.")
            st.number_input("Answers kept per model", 1, 200, key="form_top_k")
            st.checkbox("'No answer' is a valid answer", key="form_allow_empty")
            st.checkbox("Merge overlapping answers", key="form_merge")
            st.text_input("Follow-up of question (id, optional)", key="form_bridge")
            save, use = st.columns(2)
            saved = save.form_submit_button("Save question")
            used = use.form_submit_button("Use in this run without saving")
        if saved or used:
            entry = logic.question_fields(
                id=state.form_id, text=state.form_text, kind=state.form_kind, models=state.form_models,
                top_k=int(state.form_top_k), allow_empty=state.form_allow_empty, merge=state.form_merge,
                bridge_from=state.form_bridge, based_on=current.get(start) if start != NEW else None)
            try:
                typed = state.setdefault("typed_questions", {}).setdefault(source, [])
                saved = state.setdefault("typed_saved", {}).setdefault(source, {})
                if used:
                    logic.with_question(current, entry)  # checked against the template it joins
                    typed[:] = [e for e in typed if e["id"] != entry["id"]] + [entry]
                    saved.pop(entry["id"], None)
                    state.flash = f"{entry['id']} is asked in the next run (not saved)."
                else:
                    path = logic.template_path(name, folder)
                    result = logic.save_question(entry, path, context=current)
                    if any(e["id"] == entry["id"] for e in typed):  # asked in this run: now as saved
                        typed[:] = [e for e in typed if e["id"] != entry["id"]] + [entry]
                        saved[entry["id"]] = path.name
                    state.flash = (f"Saved {entry['id']} in {path} ({len(result.questions)} question(s)); pick "
                                   f"'{path.stem} (mine)' in the template list.")
            except logic.AppInputError as error:
                st.error(f"Not {'added' if used else 'saved'}: {results.plain(logic.plain_error(str(error)))}")
            else:  # rerun so the template list and question picker above show the change
                st.rerun()
        if state.get("flash"):
            st.success(results.plain(state.pop("flash")))
        edit_yaml(current, source)


def edit_yaml(current, source: str) -> None:
    st.markdown("**Or edit a whole template as text** (YAML)")
    # keyed by the template, so the editor shows the chosen template, not the first one it showed
    text = st.text_area("Template", value=logic.template_yaml(current), height=240, key=f"yaml_text:{source}")
    name = st.text_input("Save as", value=f"{current.name or 'my-questions'}-edited", key=f"yaml_name:{source}")
    check, save = st.columns(2)
    if check.button("Check", key="yaml_check"):
        try:
            checked = logic.check_template_text(text, name)
            st.success(f"Loads fine: {len(checked.questions)} question(s).")
        except logic.AppInputError as error:
            st.error(results.plain(error))
    if save.button("Save template", key="yaml_save"):
        try:
            path = logic.template_path(name)
            logic.save_template_text(text, path)
        except logic.AppInputError as error:
            st.error(f"Not saved: {results.plain(error)}")
        else:
            state.flash = f"Saved {path}; pick '{path.stem} (mine)' in the template list."
            st.rerun()


# -- run ---------------------------------------------------------------------------------------------------------

def run_section(papers, questions, options: dict) -> None:
    st.subheader("3 · Run")
    ready = papers is not None and questions is not None
    try:
        run_questions, settings = (logic.build_run(questions, options["preset"], device=options["device"],
                                                   normalize=options["normalize"],
                                                   max_sub_questions=options["max_sub"],
                                                   small_reader=options["small_reader"])
                                   if questions is not None else (None, None))
    except logic.AppInputError as error:
        st.error(results.plain(error))
        return
    if run_questions is not None:
        note = preflight.download_note(preflight.check_run(run_questions, settings, options["cache_dir"]))
        if note:
            st.info(results.plain(note))
    pressed = st.button("Run", type="primary", disabled=not ready, key="run")
    demo_asked = state.pop("autorun", False)  # the demo button's run, once
    if pressed or (ready and demo_asked):
        run(papers, run_questions, settings, options)
    outcome = state.get("outcome")
    if outcome is not None and outcome.error:  # right below the button, where the eye is after pressing it
        with st.container(key="run_failure"):
            failed(outcome)
        if state.pop("scroll_to_failure", False):
            scroll_into_view("run_failure")


def scroll_into_view(key: str) -> None:
    """Brings the container with this key into view once (a failure below the fold is a failure unseen)."""
    from streamlit.components.v1 import html

    html(f"""<script>window.parent.document.querySelector(".st-key-{key}")
             ?.scrollIntoView({{behavior: "smooth", block: "center"}});</script>""", height=0)


def run(papers, run_questions, settings, options: dict) -> None:
    """One run from the page: save uploads, run with the live estimate in the bar, keep the outcome in the state."""
    if papers and isinstance(papers[0], tuple):  # uploads: save them now under safe names
        if "upload_root" not in state:
            state.upload_root = logic.UploadFolder()
        folder = state.upload_root.path / f"run-{state.get('run_count', 0) + 1}"
        saved = logic.save_uploads([(name, data) for _, name, data in papers], folder)
        for problem in saved.refused:
            st.warning(results.plain(problem))
        if not saved.paths:
            st.error("None of the uploaded files can be read.")
            return
        papers = saved.paths
    state.run_count = state.get("run_count", 0) + 1
    bar = st.progress(0.0, text="Checking the models, then reading the files…")
    live: list[LiveEstimate] = []  # the estimate, once the papers are read and the run's plan is known

    def show(tracker: ProgressTracker) -> None:
        bar.progress(tracker.fraction(), text=tracker.describe())

    with ExitStack() as running, st.spinner("Running…"):
        def on_start(documents, plan) -> None:
            n = sum(d.readable for d in documents)
            bar.progress(0.0, text=f"{n} of {len(documents)} paper(s) read; answering questions…")
            tracker = ProgressTracker(plan, labels=logic.progress_labels(run_questions))
            # redrawn every second until the run ends, so the time moves during a long paper
            live.append(running.enter_context(LiveEstimate(tracker, show, attach=add_script_run_ctx)))

        outcome = runner.run_papers(papers, run_questions, settings, cache_dir=options["cache_dir"],
                                    on_progress=lambda event: live[0].update(event), on_start=on_start)
    if outcome.error or outcome.nothing_read:  # the results section says what went wrong, in red
        bar.empty()
    else:
        bar.progress(1.0, text=f"Finished in {format_seconds(outcome.seconds)}")
    state.outcome = outcome
    state.scroll_to_failure = bool(outcome.error)
    state.downloads = None
    if outcome.result is not None and not outcome.nothing_read:
        state.downloads, state.download_problems = results.downloads(outcome.result)
        # each run's coding goes to a file of its own, not one an earlier session left there
        state.review_path = str(review.fresh_review_path(Path.home() / "mlpsych-reviews"))


def use_demo_models() -> None:
    """The 'tiny demo models' way forward: their question file (and small reader) in the sidebar, and the same
    papers run again."""
    path = demo.demo_question_file()
    state.question_file = str(path)  # selected as the template on the rerun
    state.small_reader = str(demo.demo_small_reader())  # the fast preset's cascade, offline too
    state.autorun = True


# -- results -----------------------------------------------------------------------------------------------------

def failed(outcome) -> None:
    if not outcome.missing_models:
        st.error(f"The run failed after {format_seconds(outcome.seconds)}: {results.plain(outcome.error)}")
        return
    st.error(results.plain(outcome.error))  # says the run did not start, and which models are missing
    st.markdown("**Two ways forward**")
    st.button("Run the tiny demo models on the same papers", key="demo", on_click=use_demo_models,
              help="Tiny random-weight models built here in seconds: the answers are meaningless, but every step "
                   "of the app works, with no download.")
    st.caption(logic.LOCAL_MODELS_HELP)
    if any(c.where == "missing" and c.role == "LLM" for c in outcome.checks):
        st.caption("Or switch off 'Clean answer lists with the LLM' in the sidebar: the run then needs only the "
                   "reader models.")


def results_section() -> None:
    outcome = state.get("outcome")
    if outcome is None:
        return
    st.subheader("4 · Results")
    if outcome.error:
        st.caption("No results: the run's problem is shown under the Run button above.")
    result = outcome.result
    if result is None:
        return
    status = results.status_table(result)
    if outcome.nothing_read:
        st.error(f"Nothing to answer: none of the {len(result.documents)} file(s) could be read, so there are no "
                 "answers and nothing to download. What went wrong with each:")
        st.dataframe(status, hide_index=True, width="stretch")
        return
    info = result.info
    if info.demo_models:
        st.warning(f"**Demo answers, not real ones.** These were read by the tiny random-weight demo models, so they "
                   "are meaningless text from the papers; they only show how the app works. The downloads say so in "
                   "their name and run sheet. For real answers, run the real models (see the model check above or "
                   "the sidebar's question file).", icon="⚠️")
    st.caption(f"{len(result.documents)} paper(s) in {format_seconds(outcome.seconds)}; "
               f"cache: {info.cache_hits} reused, {info.cache_misses} computed ({results.literal(info.cache)})")
    for warning in info.notes():
        st.warning(results.plain(warning))
    for line in results.duplicate_names(result.documents):
        st.warning(results.plain(line))
    problems = status[status["status"] != "ok"]
    for _, row in problems.iterrows():
        st.warning(results.plain(f"{row['paper']} ({row['source_file']}): {row['status']}"))
    noted = status[(status["status"] == "ok") & (status["text_notes"] != "")]
    for _, row in noted.iterrows():
        st.info(results.plain(f"{row['paper']} ({row['source_file']}) was read with a note: {row['text_notes']} "
                              "(answers may be missing from what could not be read)"))
    st.markdown("**One row per paper** (the spreadsheet's *papers* sheet)")
    st.dataframe(results.overview_table(result), hide_index=True, width="stretch", key="overview")
    with st.expander("Files and their status", expanded=bool(len(problems) or len(noted))):
        st.dataframe(status, hide_index=True, width="stretch")
    answers_section(result, status)


def answers_section(result, status) -> None:
    st.markdown("**Answers** with the sentence each comes from and its page")
    table = results.results_table(result)
    ids = [q.id for q in result.questions.in_run_order()]
    unanswered = [q for q in ids if q not in set(table["question_id"])]
    if unanswered:
        st.caption("No answer in any paper: " + results.plain(", ".join(unanswered)))
    # The filters stay and apply to a new run (a filter cleared in the state alone stays in the browser's box);
    # questions and papers the new run does not have are dropped from them.
    state.filter_q = [q for q in state.get("filter_q", []) if q in ids]
    state.filter_p = [p for p in state.get("filter_p", []) if p in set(status["paper"])]
    left, middle, right = st.columns(3)
    chosen = results.ResultFilter(
        tuple(left.multiselect("Question", ids, key="filter_q")),
        tuple(middle.multiselect("Paper", list(status["paper"]), key="filter_p")),
        right.text_input("Contains (answer, evidence or technique)", key="filter_text"))
    shown = results.filter_results(table, chosen)
    st.caption(f"{len(shown)} of {len(table)} answers")
    # keyed by the filter, so a row picked among other rows does not stay picked here
    picked = st.dataframe(
        shown, hide_index=True, width="stretch", key=f"results_table:{hash(chosen)}", on_select="rerun",
        selection_mode="single-row", height=600 if len(shown) > 15 else "auto",
        column_config={
            "paper": st.column_config.TextColumn("paper", pinned=True),
            "question_id": st.column_config.TextColumn("question", pinned=True, width="small"),
            "technique": st.column_config.TextColumn("technique", help="what a follow-up question asked about"),
            "answer": st.column_config.TextColumn("answer", width="medium"),
            "evidence": st.column_config.TextColumn("evidence", width="large"),
            "page": st.column_config.NumberColumn("page", width="small"),
            "score": st.column_config.NumberColumn("score", format="%.3g", width="small",
                                                   help="the model's confidence (higher is surer)"),
            "question": st.column_config.TextColumn("full question")})
    rows = [r for r in picked.selection.rows if r < len(shown)] if picked else []
    if rows:
        st.info(results.evidence_card(shown.iloc[rows[0]].to_dict()))
    else:
        st.caption("Select a row (the box at its left) to read its whole evidence sentence here.")
    downloads = state.get("downloads") or {}
    for problem in state.get("download_problems") or []:
        st.warning(results.plain(problem))
    one, two, three = st.columns(3)
    if ".xlsx" in downloads:
        one.download_button("Download all: XLSX (all sheets, coder columns)", downloads[".xlsx"],
                            results.download_name(result, ".xlsx"), mime=XLSX_MIME, key="download_xlsx")
    if ".csv" in downloads:
        two.download_button("Download all: CSV (answers)", downloads[".csv"], results.download_name(result, ".csv"),
                            mime="text/csv", key="download_csv")
    if chosen.active:
        three.download_button(f"Download filtered: XLSX ({len(shown)} answers)",
                              # made when clicked (Streamlit >= 1.52), not on every redraw while a filter is set:
                              # each click of a 1,000-paper run's page took minutes
                              lambda: results.download_bytes(results.filtered_result(result, chosen), ".xlsx"),
                              results.download_name(result, ".xlsx", filtered=True), mime=XLSX_MIME,
                              key="download_filtered", disabled=shown.empty)
    else:
        three.caption("The filters above apply to a 'Download filtered' button here.")


XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


# -- review ------------------------------------------------------------------------------------------------------

MARK_CHOICES = {"not coded": None, "correct": True, "wrong": False}


def open_review(path, documents: dict, coder: str, papers: str, questions: str = "mlpsych") -> None:
    try:
        sheet = review.ReviewSheet(path, documents, coder)
    except logic.AppInputError as error:
        st.error(results.plain(error))
        return
    state.review_sheet = sheet
    state.review_papers = papers
    state.review_questions = questions
    state.review_id = state.get("review_id", 0) + 1  # fresh widget keys for a newly opened sheet


def review_section() -> None:
    st.subheader("5 · Review")
    st.caption("Mark each answer correct or wrong, correct it, or add what the tool missed; the least-sure answers "
               "come first and every change is kept at once, and written into the spreadsheet (its coder columns, "
               "which `mlpsych agree`, `mlpsych adapt` and `mlpsych calibrate` read) when you move to another "
               "paper, download it, or half a minute after your last change.")
    outcome = state.get("outcome")
    downloads = state.get("downloads") or {}
    if outcome is not None and outcome.result is not None and ".xlsx" in downloads:
        target = st.text_input("Keep the coding in", key="review_path")
        if st.button("Review these answers", key="review_start"):
            read = [d for d in outcome.result.documents if d.ok]
            try:
                path = review.start_review(target, downloads[".xlsx"])
                texts, template = reread.keep_run_inputs(path, read, outcome.result.questions)
            except UserError as error:
                st.error(results.plain(error))
            else:
                open_review(path, {d.id: d for d in read}, state.get("review_coder", ""), str(texts), str(template))
    with st.expander("Continue a review (a coded spreadsheet and its papers)"):
        path = st.text_input("Coded spreadsheet (.xlsx)", key="review_open_path")
        papers = st.text_input("Its papers (folder, texts.jsonl or text.json)", key="review_open_papers",
                               placeholder="blank: the texts a review started here keeps beside its spreadsheet")
        st.text_input("Coder (blank: the first coder; a name codes into correct_<name>)", key="review_coder")
        if st.button("Open the review", key="review_open"):
            # a review started on this page kept its run's texts and questions beside the spreadsheet
            texts, template = reread.run_inputs(Path(path.strip()).expanduser())
            papers = papers.strip() or (str(texts) if texts.is_file() else "")
            try:
                documents = review.papers_for_review(papers)
            except logic.AppInputError as error:
                st.error(results.plain(error))
            else:
                open_review(path.strip(), documents, state.get("review_coder", ""), papers,
                            str(template) if template.is_file() else "mlpsych")
    if "review_sheet" in state:
        review_pane(state.review_sheet)


def review_pane(sheet) -> None:
    rid = state.review_id
    counts = sheet.coded_counts()

    def saved(change: Callable[[], object]) -> object:
        """The change, saved; a file that cannot be written is said at the top of the review, not a traceback."""
        try:
            return change()
        except logic.AppInputError as error:
            state.review_error = str(error)
            return None

    def left_paper() -> None:  # the paper's changes written into the workbook (kept beside it until then)
        saved(sheet.save)

    paper = st.selectbox("Paper", list(counts), key=f"review_paper:{rid}", on_change=left_paper,
                         format_func=lambda p: f"{p} ({counts[p][0]} of {counts[p][1]} coded)")
    if paper is not None:
        st.caption(f"{counts[paper][0]} of {counts[paper][1]} answers of {results.literal(paper)} coded; each change "
                   f"is kept at once beside {results.literal(sheet.path)} and written into it when you move to "
                   "another paper, download it, or half a minute after your last change. Least-sure answers "
                   "first.")
    if sheet.notice:
        st.warning(results.plain(sheet.notice))
    if state.get("review_flash"):
        st.warning(state.pop("review_flash"))
    if state.get("review_error"):  # a change that could not be saved in the file
        st.error(results.plain(state.pop("review_error")))
    if sheet.idle_error:  # the write a while after the last change failed (nobody was waiting for it)
        st.error(results.plain(sheet.idle_error))
        sheet.idle_error = ""

    def marked(row: int) -> None:
        saved(lambda: sheet.mark(row, MARK_CHOICES[state[f"mark:{rid}:{row}"]]))

    def fixed(row: int) -> None:
        if saved(lambda: sheet.correct_to(row, state[f"fix:{rid}:{row}"])) is False:
            state.review_flash = ("Saved, but the corrected answer is not in the paper's text: `mlpsych adapt` "
                                  "will skip it (copy it as the paper writes it to train on it).")

    def noted(row: int) -> None:
        saved(lambda: sheet.note(row, state[f"note:{rid}:{row}"]))

    for item in [] if paper is None else sheet.items(paper):
        with st.container(border=True):
            sure = "–" if item.confidence is None else f"{item.confidence:.2f}"
            asked = f" · about {results.literal(item.bridge_entity)}" if item.bridge_entity else ""
            added = " · added by a coder" if item.stage == AnswerStage.CODER else ""
            st.markdown(f"**{results.literal(item.answer)}** · {results.literal(item.question_id)}{asked} · "
                        f"confidence {sure} · page {item.page or '–'}{added}")
            st.caption(results.literal(item.evidence) if item.evidence else "(no evidence sentence)")
            current = next(k for k, v in MARK_CHOICES.items() if v == item.correct)
            mark, fix, note = st.columns([2, 3, 3])
            mark.radio("Correct?", list(MARK_CHOICES), index=list(MARK_CHOICES).index(current), horizontal=True,
                       key=f"mark:{rid}:{item.row}", on_change=marked, args=(item.row,))
            fix.text_input("Corrected answer", value=item.corrected, key=f"fix:{rid}:{item.row}", on_change=fixed,
                           args=(item.row,))
            note.text_input("Notes", value=item.notes, key=f"note:{rid}:{item.row}", on_change=noted,
                            args=(item.row,))
    if paper is not None:
        add_missed(sheet, paper, rid)
    # written when clicked (the workbook first): reading a 16 MB file on every redraw, or writing it, was not free
    st.download_button("Download the coded spreadsheet", sheet.workbook_bytes, sheet.path.name, mime=XLSX_MIME,
                       key="review_download")
    reread_section(sheet)


def reread_section(sheet) -> None:
    """Adapt a reader on this coding and re-read the papers with it: a button that runs the two commands in the
    background (their progress below, polled), and the same commands to copy."""
    with st.expander("Re-read the papers not coded yet with a reader adapted on this coding"):
        st.caption("The new spreadsheet keeps this coding as it is (every paper and question coded, added answers "
                   "too) and holds the adapted reader's answers for the rest; papers coded for every question are "
                   "not read again. Continue the review in it.")
        questions = state.get("outcome").result.questions if state.get("outcome") and state.outcome.result else None
        reader = st.text_input("Reader to adapt", key="reread_reader",
                               value=questions.questions[0].models[0] if questions else "")
        plan = reread.plan_reread(sheet, reader or "READER", state.get("review_papers", ""),
                                  questions=state.get("review_questions", "mlpsych"),
                                  normalize=state.get("normalize", False))
        st.code(plan.commands(), language="bash")
        job = state.get("reread_job")
        busy = job is not None and job.poll().stage in (reread.ADAPTING, reread.READING)
        if st.button("Adapt and re-read now", key="reread_start", disabled=busy or not reader or
                     not state.get("review_papers")):
            state.reread_job = reread.RereadJob(plan)
        if state.get("reread_job") is not None:
            reread_progress()


@st.fragment(run_every=3)
def reread_progress() -> None:
    """The background re-read's stage, polled every few seconds without rerunning the page."""
    status = state.reread_job.poll()
    show = {reread.DONE: st.success, reread.FAILED: st.error}.get(status.stage, st.info)
    show(status.message)


NEAREST = "the one mentioned nearest to it"


def add_missed(sheet, paper: str, rid: int) -> None:
    with st.form(f"add_answer:{rid}", clear_on_submit=True):
        st.markdown("**Add an answer the tool missed** (paste or type it as the paper writes it)")
        question = st.selectbox("Question", list(sheet.questions()), key=f"add_q:{rid}")
        text = st.text_area("Text of the paper", key=f"add_text:{rid}", height=80)
        entities = sheet.entities(paper)
        about = st.selectbox("About (a follow-up question's answers only)", [NEAREST, *entities],
                             key=f"add_about:{rid}") if entities else NEAREST
        if st.form_submit_button("Add the missed answer"):
            try:
                row = sheet.add(paper, question, text, None if about == NEAREST else about)
            except logic.AppInputError as error:
                st.error(results.plain(error))
            else:
                entity = next((i.bridge_entity for i in sheet.items(paper) if i.row == row), None)
                topic = f" about {results.literal(entity)}" if entity else ""
                state.review_flash_ok = (f"Added to {results.literal(question)}{topic}"
                                         f": {results.literal(' '.join(text.split()))}")
                st.rerun()
    if state.get("review_flash_ok"):
        st.success(state.pop("review_flash_ok"))


def main() -> None:
    """The page, top to bottom; Streamlit reruns it on every interaction."""
    st.set_page_config(page_title="mlpsych: answers from papers", page_icon="📄", layout="wide")
    st.title("mlpsych: answers from papers")
    st.write("Upload papers, choose questions, and get a spreadsheet with every answer, the sentence it comes "
             "from and its page, ready for coding. Answers come from reading-comprehension models that copy "
             "the answer out of the paper; check them against the evidence.")
    options = sidebar()
    papers = papers_section()
    questions = questions_section(options["question_file"])
    run_section(papers, questions, options)
    results_section()
    review_section()


if __name__ == "__main__":  # Streamlit runs this file as __main__ (`mlpsych app`); app.py calls main()
    main()
