"""Published tables and our own runs as one tidy pandas DataFrame (the app's results tab).

Files (all in ``assets/results/``):
- copies of the papers' tables (``../shared/results/*.csv``), each row carrying its ``paper``
  and ``table``; made by ``mlm-icl results import-published ../shared/results``;
- ``ours.csv``: the runs of ``mlm-icl evaluate`` shipped with the app (summary rows with the
  command that reruns each, date, n).

Your own runs go to ``runs/ours.csv`` (``mlm-icl results add-runs runs/eval/summary.csv``) and
are shown beside the shipped ones; merging into the shipped table is explicit (``--into
assets/results/ours.csv``). Either way a run never silently replaces one on more items.

``load_results()`` returns one row per number, columns:
paper, table, task (our registry name where the task is registered, else the table's label),
task_label (as printed), group (the task registry's, not the table's heading: ``task_group``),
model, model_size (parameters, where known), shots (int; the paper's k for "few-shot"),
shots_label, metric, value (percent, as printed), variant (what else distinguishes the number:
ranking method, fine-tuned vs zero-shot, ...), source ("published" or "ours"), and for our runs
n, stderr, std, seconds, command, date.
Published averages are kept as printed (the papers' averages are not always plain means) with
task "average".
"""

import re
from pathlib import Path

import pandas as pd

from ..evaluation_settings import ResultsFilter
from ..paths import ASSETS
from ..tasks import TASKS
from ..user_text import as_said, nearest
from .identity import differences
from .rows import upsert

RESULTS_DIR = ASSETS / "results"
OURS = RESULTS_DIR / "ours.csv"  # shipped runs
USER_RUNS = Path("runs") / "ours.csv"  # the user's runs, relative to where the command runs
SHIPPED_TABLE, USER_TABLE = "shipped runs", "your runs"  # the "table" column of our runs
COLUMNS = ["paper", "table", "task", "task_label", "group", "model", "model_size", "shots",
           "shots_label", "metric", "value", "variant", "source", "n", "stderr", "std", "seconds",
           "method", "score", "command", "date"]

SAMUEL = "Samuel 2024, BERTs are Generative In-Context Learners"
ALBERT = "Zero-shot NormPLL with ALBERT (Winogradversarial)"
HONOVICH = "Honovich et al. 2022, Instruction Induction"
PAPERS = {"samuel2024": SAMUEL, "albert_pll": ALBERT, "instruction_induction": HONOVICH}

# The BERTs paper's labels -> our task names
LABEL_TO_TASK = {
    "BoolQ": "boolq", "CB": "cb", "COPA": "copa", "MultiRC": "multirc", "ReCoRD": "record",
    "RTE": "rte", "WiC": "wic", "WSC": "wsc", "HellaSwag": "hellaswag", "StoryCloze": "storycloze",
    "Winograd": "winograd", "Winogrande": "winogrande", "DE→EN": "wmt_de_en", "EN→DE": "wmt_en_de",
    "FR→EN": "wmt_fr_en", "EN→FR": "wmt_en_fr", "RO→EN": "wmt_ro_en", "EN→RO": "wmt_en_ro",
    "DE-EN": "wmt_de_en", "EN-DE": "wmt_en_de", "FR-EN": "wmt_fr_en", "EN-FR": "wmt_en_fr",
    "RO-EN": "wmt_ro_en", "EN-RO": "wmt_en_ro", "NQs": "nq_open", "Natural Questions": "nq_open",
    "TriviaQA": "triviaqa", "TriviaQA (wiki)": "triviaqa", "WebQs": "webqs", "Web Questions": "webqs",
    "PIQA": "piqa", "ARC-C": "arc_challenge", "ARC (challenge)": "arc_challenge", "ARC-E": "arc_easy",
    "ARC (easy)": "arc_easy", "OpenBookQA": "openbookqa", "Average": "average",
}
# Honovich et al.'s table titles -> our in-context instruction-induction tasks
II_TITLE_TO_TASK = {t.title: t.name for t in TASKS.values()
                    if t.group == "instruction induction" and t.convert == "instruction_pairs"}
DEBERTA_SIZES = {"0.1B": 0.1e9, "0.4B": 0.4e9, "0.9B": 0.9e9, "1.4B": 1.4e9}  # as the paper names them
GPT3_SIZES = {"Ada": 350e6, "Babbage": 1.3e9, "Curie": 6.7e9, "DaVinci": 175e9}  # Brown et al. 2020


# ---------------------------------------------------------------- published tables


def import_published(source_dir: str | Path, target_dir: str | Path = RESULTS_DIR) -> list[Path]:
    """Copy the papers' CSV tables, adding ``paper`` and ``table`` to every row."""
    written = []
    for path in sorted(Path(source_dir).glob("*.csv")):
        frame = pd.read_csv(path)
        prefix = next(p for p in PAPERS if path.stem.startswith(p))
        if "table" not in frame.columns:
            number = path.stem[len(prefix):].lstrip("_").split("_")[0]
            frame.insert(0, "table", f"Table {number.removeprefix('table')}" if number.startswith("table")
                         else number)
        frame.insert(0, "paper", PAPERS[prefix])
        out = Path(target_dir) / path.name
        out.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(out, index=False)
        written.append(out)
    return written


# ---------------------------------------------------------------- task groups

# A task's group is the registry's (demo.tasks), whatever heading a paper's table files it under
# ("Translation (SacreBLEU)" is "translation"), so the same tasks form one group in every table,
# filter and figure. A paper's average over tasks of several groups names them all, joined.
GROUP_JOIN = " + "


def task_group(task: str, fallback: str = "") -> str:
    """The group of a registered task; ``fallback`` (the table's own) for any other task."""
    return TASKS[task].group if task in TASKS else fallback


def group_parts(group: str) -> list[str]:
    """The groups a row's group names: itself, or each group of a cross-group average."""
    return str(group).split(GROUP_JOIN)


def _joined(groups) -> str:
    return GROUP_JOIN.join(dict.fromkeys(groups))


def _samuel_main(frame: pd.DataFrame, few_shots: dict) -> list[dict]:
    """Tables 1-4: GPT-3 1.3B vs DeBERTa 1.4B at 0, 1 and few shots."""
    rows = []
    sections = {}  # (table, heading): the groups of its tasks, for its average
    for r in frame.to_dict("records"):
        task = LABEL_TO_TASK.get(r["task"], r["task"])
        if task in TASKS:
            sections.setdefault((r["table"], r["group"]), []).append(task_group(task))
    for r in frame.to_dict("records"):
        task = LABEL_TO_TASK.get(r["task"], r["task"])
        label = r["shots"]
        shots = {"0-shot": 0, "1-shot": 1}.get(label, few_shots.get(task))
        metric = ("bleu" if r["table"] == "Table 3" else
                  "exact_match" if task in ("nq_open", "triviaqa", "webqs") else "accuracy")
        size = 1.3e9 if r["model"].startswith("GPT-3") else 1.4e9
        group = _joined(sections[(r["table"], r["group"])]) if task == "average" else r["group"]
        rows.append(dict(paper=r["paper"], table=r["table"], task=task, task_label=r["task"],
                         group=group, model=r["model"], model_size=size, shots=shots,
                         shots_label=label, metric=metric, value=r["value"]))
    return rows


def _samuel_table6(frame: pd.DataFrame) -> list[dict]:
    """Table 6: every DeBERTa size, 0-shot (1.4B), 1-shot (all sizes), n-shot (1.4B). Each
    section ends with its average (over the section's tasks)."""
    rows, section = [], []
    metrics = {"acc.": "accuracy", "F1": "f1_macro", "EM acc.": "exact_match", "F1a": "multirc_f1a",
               "BLEU": "bleu"}
    for r in frame.to_dict("records"):
        task = LABEL_TO_TASK.get(r["task"], r["task"])
        if task == "average":
            group, section = _joined(section), []
        else:
            group = task_group(task)
            section.append(group)
        metric = metrics.get(r["metric"], r["metric"])
        if task == "multirc" and metric == "exact_match":
            metric = "multirc_em"
        if task == "record" and metric == "f1_macro":
            metric = "token_f1"
        for column in [c for c in frame.columns if "shot_" in c]:
            kind, size = column.split("shot_")
            shots = {"0": 0, "1": 1}.get(kind) if kind in ("0", "1") else (
                int(r["n_shots"]) if str(r["n_shots"]).isdigit() else None)
            rows.append(dict(paper=r["paper"], table=r["table"], task=task, task_label=r["task"],
                             group=group, model=f"DeBERTa {size}", model_size=DEBERTA_SIZES[size],
                             shots=shots, shots_label=f"{kind}-shot" if kind != "n" else "few-shot",
                             metric=metric if task != "average" else "average",
                             value=pd.to_numeric(r[column], errors="coerce"),
                             variant=f"{r['split']} split" if r["split"] != "_" else ""))
    return rows


def _samuel_table5(frame):
    return [dict(paper=r["paper"], table=r["table"], task="record", task_label="ReCoRD",
                 group="SuperGLUE", model="DeBERTa 1.4B", model_size=1.4e9, shots=0,
                 shots_label="0-shot", metric=metric, value=r[column], variant=r["ranking_method"])
            for r in frame.to_dict("records")
            for column, metric in (("ReCoRD_EM", "exact_match"), ("ReCoRD_F1", "token_f1"))]


def _albert_table1(frame):
    return [dict(paper=r["paper"], table=r["table"], task="winogradversarial",
                 task_label="Winogradversarial", group="language modeling",
                 model=f"{r['model_family_large']} (large)", shots=0, shots_label="0-shot",
                 metric="accuracy", value=r[column], variant=variant)
            for r in frame.to_dict("records")
            for column, variant in (("finetuned_on_winogrande_acc", "fine-tuned on Winogrande"),
                                    ("zero_shot_pll_acc", "zero-shot PLL"))]


def _albert_table2(frame):
    tasks = [c for c in frame.columns if c not in ("paper", "table", "model")]
    return [dict(paper=r["paper"], table=r["table"], task="average" if t == "Average" else f"cats_{t}",
                 task_label=t, group="CATS commonsense suite", model=r["model"], shots=0,
                 shots_label="0-shot", metric="accuracy", value=round(100 * r[t], 2),
                 variant="NormPLL")
            for r in frame.to_dict("records") for t in tasks]


def _albert_table3(frame):
    return [dict(paper=r["paper"], table=r["table"], task=task, task_label=label,
                 group="language modeling", model=r["model"], shots=0, shots_label="0-shot",
                 metric="accuracy", value=r[column],
                 variant=f"NormPLL, full sentence; checkpoint {r['model_size']}, "
                         f"{r['gpu_time_hhmmss_4xV100']} on 4xV100")
            for r in frame.to_dict("records")
            for column, task, label in (("winograd_wsc_acc", "winograd", "Winograd (WSC273)"),
                                        ("winogrande_train_xl_acc", "winogrande", "Winogrande (train_xl)"))]


def _albert_table4(frame):
    return [dict(paper=r["paper"], table=r["table"], task="timedial", task_label="TimeDial",
                 group="language modeling", model=r["model"], shots=0, shots_label="0-shot",
                 metric="2-best accuracy", value=round(100 * r["two_best_accuracy"], 2),
                 variant=f"checkpoint {r['model_size']}")
            for r in frame.to_dict("records")]


def _honovich_table2(frame):
    rows = []
    for r in frame.to_dict("records"):
        size = r["size"] if isinstance(r["size"], str) else ""
        rows += [dict(paper=r["paper"], table=r["table"], task="instruction_induction",
                      task_label="all 24 tasks", group="instruction induction",
                      model=f"{r['family']} {size}".strip(),
                      model_size=GPT3_SIZES.get(size) if r["family"] == "GPT-3" else None,
                      shots=5, shots_label="5 demonstrations (induction)", metric=metric,
                      value=r[column])
                 for column, metric in (("bertscore", "bertscore"), ("execution_accuracy", "execution_accuracy"))]
    return rows


def _honovich_table4(frame):
    rows = []
    for r in frame.to_dict("records"):
        task = II_TITLE_TO_TASK.get(r["task"], r["task"])
        metric = TASKS[task].metrics[0] if task in TASKS else "accuracy"
        rows += [dict(paper=r["paper"], table=r["table"], task=task, task_label=r["task"],
                      group="instruction induction", model="GPT-3 DaVinci", model_size=175e9,
                      shots=5, shots_label="5-shot", metric=metric, value=r["gpt3_incontext_acc"],
                      variant="in-context"),
                 dict(paper=r["paper"], table=r["table"], task=task, task_label=r["task"],
                      group="instruction induction", model="InstructGPT DaVinci", shots=5,
                      shots_label="5-shot", metric=metric, value=r["instructgpt_incontext_acc"],
                      variant="in-context"),
                 dict(paper=r["paper"], table=r["table"], task=task, task_label=r["task"],
                      group="instruction induction", model="human annotators", shots=5,
                      shots_label="5 demonstrations (induction)", metric="correct instructions (%)",
                      value=r["human_study_correct_pct"], variant="human study")]
    return rows


READERS = {
    "samuel2024_gpt3_vs_deberta.csv": None,  # needs the shots of table 6: handled in load_published
    "samuel2024_table6_all_results.csv": _samuel_table6,
    "samuel2024_table5_ranking_ablation.csv": _samuel_table5,
    "albert_pll_table1_winogradversarial.csv": _albert_table1,
    "albert_pll_table2_cats_suite_normpll.csv": _albert_table2,
    "albert_pll_table3_winograd_winogrande.csv": _albert_table3,
    "albert_pll_table4_timedial.csv": _albert_table4,
    "instruction_induction_table2_overall.csv": _honovich_table2,
    "instruction_induction_table4_incontext.csv": _honovich_table4,
}


def load_published(folder: str | Path = RESULTS_DIR) -> pd.DataFrame:
    """All published numbers, tidy (one row per number)."""
    folder = Path(folder)
    missing = [name for name in READERS if not (folder / name).is_file()]
    if missing:
        raise ValueError(f"Published tables missing in '{folder}': {', '.join(missing)}. Run "
                         f"mlm-icl results import-published ../shared/results")
    table6 = pd.read_csv(folder / "samuel2024_table6_all_results.csv")
    few_shots = {LABEL_TO_TASK.get(t, t): int(n) for t, n in zip(table6["task"], table6["n_shots"])
                 if str(n).isdigit()}
    rows = _samuel_main(pd.read_csv(folder / "samuel2024_gpt3_vs_deberta.csv"), few_shots)
    for name, reader in READERS.items():
        if reader is not None:
            rows += reader(pd.read_csv(folder / name))
    frame = pd.DataFrame(rows)
    frame["source"] = "published"
    return _columns(frame)


# ---------------------------------------------------------------- our runs


def load_ours(path: str | Path = OURS) -> pd.DataFrame:
    """Our runs (summary rows of ``mlm-icl evaluate``), in the same columns as the published ones."""
    path = Path(path)
    if not path.is_file():
        return _columns(pd.DataFrame(columns=COLUMNS))
    frame = pd.read_csv(path)
    # a run of the approximate prefix cache says so (a row without a cache, as the shipped table's
    # first ones, or a table without the column, is a run of the exact method)
    fast = frame.get("cache", pd.Series("exact", index=frame.index)).eq("prefix")
    frame = frame.assign(paper="ours", table=SHIPPED_TABLE, task_label=frame["title"],
                         shots_label=frame["shots"].astype(str) + "-shot",
                         value=frame["value"], variant=_scoring(frame) + (
                             " / " + frame["score"].fillna("")).where(frame["score"].notna(), "")
                         + pd.Series(" / prefix cache", index=frame.index).where(fast, ""),
                         source="ours")
    return _columns(frame.assign(variant=_told_apart(frame)))


def _told_apart(frame: pd.DataFrame) -> pd.Series:
    """The variant of each run, with what sets it apart (``model.dtype=bfloat16``) where runs share
    task, model, shots, metric and variant but not their identity (``demo.evaluation.identity``)."""
    variant = frame["variant"].copy()
    if "identity" not in frame.columns:
        return variant
    for _, group in frame.groupby(["task", "model", "shots", "metric", "variant"], dropna=False):
        if group["identity"].nunique() > 1:
            for index, differs in zip(group.index, differences(group["identity"].tolist())):
                if differs:
                    variant[index] = f"{variant[index]} / {differs}".removeprefix(" / ")
    return variant


def _scoring(frame: pd.DataFrame) -> pd.Series:
    """How each run ranked or wrote: a ranked run's scoring as its run id names it (the method
    with its masks, ``right_masks2``, ``decoder1``, and what else differs from the task's own:
    ``-mean``, ``-stride8``; its ``scoring`` column, or read from the id of a table written before
    that column), so that runs of one method with other masks tell apart; else the method
    (``generate``, a table without run ids)."""
    method = frame["method"].fillna("")
    if "run" not in frame.columns:
        return method
    # an older ranked run's id: task__model__Kshot__<scoring>__<score>__seedS
    tag = frame["run"].astype(str).str.rsplit("__", n=3).str[1]
    if "scoring" in frame.columns:
        tag = frame["scoring"].where(frame["scoring"].notna(), tag)
    return tag.where(frame["score"].notna() & tag.notna(), method)


SUMMARY_COLUMNS = {"run", "task", "model", "shots", "metric", "value", "n"}


def add_runs(summary_csv: str | Path, target: str | Path = USER_RUNS, replace: bool = False) -> pd.DataFrame:
    """Merge evaluate's summary rows into a runs table (the user's by default). A rerun of the same
    run and metric replaces the old row, but never silently with a run on fewer items
    (``replace=True`` allows it). The merged table's ``attrs["replaced"]`` lists the replaced runs."""
    new = _read_summary(Path(summary_csv))
    target = Path(target)
    replaced_runs = []
    if target.is_file():
        old = _read_summary(target)
        keys = set(zip(new["run"], new["metric"]))
        replaced = old[[(r, m) in keys for r, m in zip(old["run"], old["metric"])]]
        smaller = replaced.merge(new, on=["run", "metric"], suffixes=("_old", "_new")).query("n_new < n_old")
        if len(smaller) and not replace:
            first = smaller.iloc[0]
            raise ValueError(
                f"{summary_csv} would replace {len(smaller)} row(s) of {target} with runs on fewer items "
                f"(e.g. {first['run']}: {int(first['n_old'])} items -> {int(first['n_new'])}). Nothing "
                f"was changed; pass --replace to do it anyway.")
        replaced_runs = sorted(set(replaced["run"]))
        new = upsert(old, new, ["run", "metric"])
    new = new.sort_values(["task", "model", "shots", "metric"], kind="stable")
    target.parent.mkdir(parents=True, exist_ok=True)
    new.to_csv(target, index=False)
    new.attrs["replaced"] = replaced_runs
    return new


def _read_summary(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise ValueError(f"{path} does not exist: give the summary.csv that mlm-icl evaluate wrote.")
    try:
        table = pd.read_csv(path)
    except (ValueError, UnicodeDecodeError) as err:  # pandas' parser errors are ValueErrors
        raise ValueError(f"{path} is not a CSV table: {err}") from None
    missing = SUMMARY_COLUMNS - set(table.columns)
    if missing:
        raise ValueError(f"{path} is not a summary of mlm-icl evaluate: it lacks the column(s) "
                         f"{', '.join(sorted(missing))}.")
    return table


# ---------------------------------------------------------------- ranking methods (Table 5)

# The BERTs paper's Table 5 (ReCoRD, DeBERTa 1.4B, 0-shot) ranks candidates five ways; each row's
# label as the table prints it -> the same method in our runs (its scoring as the run id names
# it, ``_scoring``; the decoder's with the family's padding masks, whatever their number) and a
# short name for figures and tables
TABLE5 = "Table 5"
RANKING_METHODS = {
    "Pseudo log-likelihood; 1 mask (Salazar et al., 2020)": ("salazar", "1 mask"),
    "Pseudo log-likelihood; 2 masks": ("right_masks1", "+1 right mask"),
    "Pseudo log-likelihood; 3 masks (paper's method)": ("right_masks2", "+2 right masks (paper's)"),
    "Pseudo log-likelihood; 4 masks": ("right_masks3", "+3 right masks"),
    "Exact log-likelihood": ("decoder", "decoder's likelihood"),
}
ABLATION_COLUMNS = ["method", "method_label", "source", "model", "model_size", "task_label", "shots_label",
                    "metric", "value", "n"]


def _ranking_method(scoring: str) -> str | None:
    """The Table 5 row (its printed label) of one of our runs' scoring, or None."""
    plain = re.sub(r"^decoder\d+$", "decoder", scoring)
    return next((label for label, (ours, _) in RANKING_METHODS.items() if ours == plain), None)


def ranking_ablation(frame: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 5 and our runs ranked by the same methods, one row per number
    (``ABLATION_COLUMNS``), the methods in the table's order: ``method`` is the paper's label,
    ``method_label`` its short name. Our runs count when their scoring is exactly one of the five
    (the sum of log-probs, the task's own scope and normalisation, exact) and their task, model
    and shots were ranked by two methods or more; then, per model and shots, the mean over the
    tasks ranked by all five (task "mean over K tasks")."""
    paper = frame[(frame["paper"] == SAMUEL) & (frame["table"] == TABLE5)]
    ours = frame[frame["source"] == "ours"]
    ours = ours.assign(method=ours["variant"].astype(str).str.split(" / ").str[0].map(_ranking_method))
    ours = ours[ours["method"].notna()].drop_duplicates(["model", "task", "shots_label", "metric", "method"])
    keys = ["model", "task_label", "shots_label", "metric"]
    ours = ours[ours.groupby(keys)["method"].transform("nunique") >= 2]
    rows = pd.concat([paper.assign(method=paper["variant"]), ours, _ablation_means(ours)], ignore_index=True)
    rows = rows[rows["method"].isin(RANKING_METHODS)]
    order = {label: i for i, label in enumerate(RANKING_METHODS)}
    rows = rows.assign(method_label=rows["method"].map(lambda m: RANKING_METHODS[m][1]),
                       rank=rows["method"].map(order), mean=rows["task_label"].astype(str).str.startswith("mean "))
    return rows.sort_values(["source", "model", "shots_label", "mean", "task_label", "rank"],
                            key=lambda c: c.ne("published") if c.name == "source" else c,
                            kind="stable")[ABLATION_COLUMNS].reset_index(drop=True)


def _ablation_means(ours: pd.DataFrame) -> pd.DataFrame:
    """Per model, shots and metric: the mean over the tasks ranked by all five methods."""
    complete = ours[ours.groupby(["model", "task_label", "shots_label", "metric"])["method"]
                    .transform("nunique") == len(RANKING_METHODS)]
    if complete.empty:
        return complete
    means = (complete.groupby(["model", "model_size", "shots_label", "metric", "method"], as_index=False,
                              dropna=False)
             .agg(value=("value", "mean"), tasks=("task_label", "nunique")))
    return means.assign(source="ours", task_label="mean over " + means["tasks"].astype(str) + " tasks",
                        value=means["value"].round(2), n=None).drop(columns="tasks")


METRIC_SHORT = {"exact_match": "EM", "token_f1": "F1", "accuracy": "acc."}


def ablation_table(rows: pd.DataFrame) -> pd.DataFrame:
    """``ranking_ablation``'s rows side by side: one row per method (the table's order), one
    column per source, task, metric, model and shots in ``rows``' order (the paper's first), n in
    the name where it is known (several n: each)."""
    if rows.empty:
        return pd.DataFrame(columns=["method"])
    rows = rows.assign(column=[_ablation_column(r, rows) for r in rows.to_dict("records")])
    table = rows.pivot_table(index="method_label", columns="column", values="value", aggfunc="first",
                             sort=False)
    methods = [short for _, short in RANKING_METHODS.values() if short in table.index]
    columns = list(dict.fromkeys(rows["column"]))
    return table.reindex(index=methods, columns=columns).rename_axis(index="method", columns=None).reset_index()


def _ablation_column(row: dict, rows: pd.DataFrame) -> str:
    same = rows[(rows["model"] == row["model"]) & (rows["task_label"] == row["task_label"])
                & (rows["shots_label"] == row["shots_label"]) & (rows["metric"] == row["metric"])]
    ns = sorted({int(n) for n in same["n"].dropna()})
    counted = f", n={'/'.join(map(str, ns))}" if ns else ""
    who = "paper" if row["source"] == "published" else "ours"
    metric = METRIC_SHORT.get(row["metric"], row["metric"])
    return f"{who}: {row['task_label']} {metric} ({row['model']}, {row['shots_label']}{counted})"


FILTER_COLUMNS = {"papers": "paper", "groups": "group", "models": "model", "shots": "shots_label",
                  "tasks": "task_label"}


def filter_results(filters: ResultsFilter, frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows of ``frame`` (default: every result, ``load_results()``) matching every non-empty
    filter."""
    frame = load_results() if frame is None else frame
    return frame[_matching(filters, frame)]


def _matching(filters: ResultsFilter, frame: pd.DataFrame, leave_out: str = "") -> pd.Series:
    """Which rows match every non-empty filter but ``leave_out``; a cross-group average matches
    each of its groups."""
    keep = pd.Series(True, index=frame.index)
    for name, column in FILTER_COLUMNS.items():
        wanted = set(getattr(filters, name))
        if wanted and name != leave_out:
            values = frame[column].astype(str)
            keep &= (values.map(lambda g: not wanted.isdisjoint(group_parts(g))) if name == "groups"
                     else values.isin(wanted))
    return keep


def unmatched(filters: ResultsFilter, frame: pd.DataFrame) -> list[tuple[str, str, str | None]]:
    """(filter, value, the nearest value the tables have, if any) for each filter value that no
    row matches whatever the other filters say: a misspelt or unknown name."""
    found = []
    for name, column in FILTER_COLUMNS.items():
        for value in getattr(filters, name):
            if not _matching(ResultsFilter(**{name: [value]}), frame).any():
                known = {part for g in frame[column].astype(str) for part in group_parts(g)} if name == "groups" \
                    else set(frame[column].astype(str))
                found.append((name, value, nearest(value, sorted(known))))
    return found


def no_match(filters: ResultsFilter, frame: pd.DataFrame) -> str:
    """Why no row matches ``filters``, in words: the first value no result has (and the nearest
    one that some result has), else the combination."""
    for name, value, near in unmatched(filters, frame):
        return (f"No result has {as_said(value)} in the {name} filter"
                + (f"; the nearest it has is {as_said(near)}." if near else "; pick from the filter's list."))
    return "No result matches these filters together: remove some of them."


def filter_choices(filters: ResultsFilter, frame: pd.DataFrame | None = None) -> dict[str, list[str]]:
    """Each filter's choices (``ResultsFilter`` field -> values): the values that keep some row
    given the other filters, so that adding one never leaves the table empty, and the values
    chosen already (so that they can be removed). Task groups are offered one by one."""
    frame = load_results() if frame is None else frame
    choices = {}
    for name, column in FILTER_COLUMNS.items():
        values = frame.loc[_matching(filters, frame, leave_out=name), column].dropna().astype(str)
        if name == "groups":
            values = [part for group in values for part in group_parts(group)]
        choices[name] = sorted(set(values) | set(getattr(filters, name)))
    return choices


def load_results(folder: str | Path = RESULTS_DIR, user_runs: str | Path = USER_RUNS) -> pd.DataFrame:
    """Published numbers, the shipped runs and the user's runs (where there are any) together."""
    frames = [load_published(folder), load_ours(Path(folder) / "ours.csv")]
    if Path(user_runs).is_file():
        frames.append(load_ours(user_runs).assign(table=f"{USER_TABLE} ({user_runs})"))
    return pd.concat(frames, ignore_index=True)


def _columns(frame: pd.DataFrame) -> pd.DataFrame:
    for column in COLUMNS:
        if column not in frame.columns:
            frame[column] = None
    frame = frame[COLUMNS].copy()
    frame["shots"] = pd.to_numeric(frame["shots"], errors="coerce").astype("Int64")
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce")
    frame["model_size"] = pd.to_numeric(frame["model_size"], errors="coerce")
    frame["variant"] = frame["variant"].fillna("")
    # a registered task is in its registry group whichever table printed it, our runs included
    frame["group"] = [task_group(t, g) for t, g in zip(frame["task"], frame["group"])]
    return frame
