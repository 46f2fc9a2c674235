#!/usr/bin/env python3
"""Check runtime/tokenizer's chat-template goldens against transformers.

runtime/tokenizer renders Hugging Face chat templates in Go (gonja). Its
golden cases are listed in runtime/tokenizer/testdata/chat/cases.json (written
by `go test ./runtime/tokenizer/ -run TestChatTemplate -update`). This script
renders every case with transformers' apply_chat_template(tokenize=False) and
compares the result byte for byte with what the Go tests expect: the golden
file, the inline "want", an expected error (a substring of transformers'
exception), or the absence of a template. It exits 0 when every case agrees,
1 on any difference, 2 on a usage error; the last line is "N passed, M failed".

How a case is rendered:
  * A fixture case (a checkpoint-like directory under testdata/chat): the
    directory is copied to a temporary one, a minimal tokenizer.json is added
    (a WordLevel vocabulary of its special tokens; tokenize=False needs no
    real vocabulary) and tokenizer_class is set to PreTrainedTokenizerFast,
    then it is loaded with AutoTokenizer.from_pretrained. transformers' own
    loader therefore picks the template (chat_template.jinja over
    tokenizer_config.json, list form and its "default") and the special
    tokens (strings or AddedToken objects, null ones left out).
  * An inline case (a "template" string): the same minimal tokenizer with the
    case's special tokens and chat_template set to the template.
  * When no tokenizer can be built (transformers missing, or a version whose
    loader rejects the stand-in), the case falls back to jinja2 configured as
    transformers configures it: ImmutableSandboxedEnvironment(trim_blocks=True,
    lstrip_blocks=True) with loopcontrols and a {% generation %} tag, tojson as
    json.dumps(ensure_ascii=False, ...), raise_exception, strftime_now; the
    template and special tokens chosen by transformers' tokenizer rules. The
    summary counts the cases that took this path. --jinja2 forces it.
  * --hub also fetches tokenizer_config.json of the checkpoints the fixtures
    were taken from (needs network access to the Hub) and checks that the
    committed chat_template and special tokens are theirs, at the Hub's
    current revision.

Usage, from the repository root, on a machine with transformers:
  pip install transformers tokenizers jinja2
  python3 scripts/chat_template_hf.py              # apply_chat_template
  python3 scripts/chat_template_hf.py --hub        # and compare with the Hub
  python3 scripts/chat_template_hf.py --jinja2     # jinja2 only (pip install jinja2)
  python3 scripts/chat_template_hf.py --testdata runtime/tokenizer/testdata/chat -v
"""
import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
from datetime import datetime

# Where the real fixtures come from (testdata/chat/README.md has the details).
HUB = {
    "olmoe-1b-7b-0924-instruct": "allenai/OLMoE-1B-7B-0924-Instruct",
    "qwen1.5-moe-a2.7b-chat": "Qwen/Qwen1.5-MoE-A2.7B-Chat",
    "mistral-7b-instruct-v0.2": "mistralai/Mistral-7B-Instruct-v0.2",
}

SPECIAL_KEYS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


class NoTemplate(Exception):
    """The tokenizer has no chat template."""


def token_text(value):
    if isinstance(value, dict):
        return value.get("content")
    return value


def read_config(fixture_dir):
    path = os.path.join(fixture_dir, "tokenizer_config.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def special_tokens_map(cfg):
    """transformers' special_tokens_map: set tokens only, as strings."""
    out = {}
    for key in SPECIAL_KEYS:
        text = token_text(cfg.get(key))
        if text is not None:
            out[key] = text
    extra = [token_text(t) for t in cfg.get("additional_special_tokens") or []]
    if extra:
        out["additional_special_tokens"] = extra
    return out


# ---------------------------------------------------------------- jinja2 path


def jinja2_environment():
    import jinja2
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        # transformers' AssistantTracker: {% generation %} renders its body.
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def select_template(fixture_dir, cfg):
    """transformers' tokenizer rules: template files win over the config."""
    templates = {}
    path = os.path.join(fixture_dir, "chat_template.jinja")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            templates["default"] = f.read()
    for path in sorted(glob.glob(os.path.join(fixture_dir, "additional_chat_templates", "*.jinja"))):
        with open(path, encoding="utf-8") as f:
            templates[os.path.basename(path)[: -len(".jinja")]] = f.read()
    if not templates:
        value = cfg.get("chat_template")
        if value is None:
            raise NoTemplate()
        if isinstance(value, str):
            return value
        if isinstance(value, dict):
            templates = dict(value)
        else:
            templates = {entry["name"]: entry["template"] for entry in value}
    if "default" not in templates:
        raise ValueError(
            "This model has multiple chat templates with no default specified! "
            f"Available template names are {sorted(templates.keys())}."
        )
    return templates["default"]


def render_jinja2(case, fixture_dir, messages):
    if fixture_dir is not None:
        cfg = read_config(fixture_dir)
        template = select_template(fixture_dir, cfg)
        special = special_tokens_map(cfg)
    else:
        template = case["template"]
        special = dict(case.get("special") or {})
    compiled = jinja2_environment().from_string(template)
    return compiled.render(
        messages=messages,
        tools=None,
        documents=None,
        add_generation_prompt=case["add_generation_prompt"],
        **special,
    )


# ---------------------------------------------------------- transformers path


def write_stand_in_tokenizer(directory, tokens):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0}
    for tok in tokens:
        if tok is not None and tok not in vocab:
            vocab[tok] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(os.path.join(directory, "tokenizer.json"))


def load_fixture_tokenizer(fixture_dir):
    from transformers import AutoTokenizer

    cfg = read_config(fixture_dir)
    tmp = tempfile.mkdtemp(prefix="chat_template_hf_")
    try:
        shutil.copytree(fixture_dir, tmp, dirs_exist_ok=True)
        cfg = dict(cfg)
        cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
        with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, ensure_ascii=False)
        special = special_tokens_map(cfg)
        tokens = [v for k, v in special.items() if k != "additional_special_tokens"]
        tokens += special.get("additional_special_tokens", [])
        write_stand_in_tokenizer(tmp, tokens)
        return AutoTokenizer.from_pretrained(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def inline_tokenizer(case):
    from transformers import PreTrainedTokenizerFast

    tmp = tempfile.mkdtemp(prefix="chat_template_hf_")
    try:
        special = dict(case.get("special") or {})
        write_stand_in_tokenizer(tmp, list(special.values()))
        tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(tmp, "tokenizer.json"), **special)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    tok.chat_template = case["template"]
    return tok


class StandInFailed(Exception):
    """No tokenizer could be built for the case; use jinja2."""


def render_transformers(case, fixture_dir, messages):
    try:
        tok = load_fixture_tokenizer(fixture_dir) if fixture_dir is not None else inline_tokenizer(case)
    except ImportError as e:
        raise StandInFailed(str(e))
    except Exception as e:
        # Loading reads the template but does not compile it, so a failure
        # here is the stand-in's, not the template's.
        raise StandInFailed(f"{type(e).__name__}: {e}")
    if getattr(tok, "chat_template", None) is None:
        raise NoTemplate()
    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=case["add_generation_prompt"])


# -------------------------------------------------------------------- checks


def check_case(case, testdata, conversations, force_jinja2):
    """Returns (ok, path, detail)."""
    messages = [{"role": m["role"], "content": m["content"]} for m in conversations[case["conversation"]]]
    fixture_dir = os.path.join(testdata, case["fixture"]) if case.get("fixture") else None
    path = "jinja2"
    try:
        if force_jinja2:
            out = render_jinja2(case, fixture_dir, messages)
        else:
            try:
                out = render_transformers(case, fixture_dir, messages)
                path = "transformers"
            except StandInFailed as why:
                path = f"jinja2 (no tokenizer: {why})"
                out = render_jinja2(case, fixture_dir, messages)
    except NoTemplate:
        if case.get("no_template"):
            return True, path, "no template, as expected"
        return False, path, "transformers found no chat template"
    except Exception as e:
        text = f"{type(e).__name__}: {e}"
        if case.get("error") is not None:
            if case["error"] in text:
                return True, path, f"failed as expected: {text}"
            return False, path, f"failed with {text!r}, want an error containing {case['error']!r}"
        return False, path, f"failed: {text}"
    if case.get("no_template"):
        return False, path, f"rendered {out!r}, want no template"
    if case.get("error") is not None:
        return False, path, f"rendered {out!r}, want an error containing {case['error']!r}"
    if case.get("want") is not None:
        want = case["want"]
    else:
        with open(os.path.join(testdata, case["golden"]), encoding="utf-8", newline="") as f:
            want = f.read()
    if out != want:
        return False, path, f"output differs\n      got  {out!r}\n      want {want!r}"
    return True, path, "identical"


def check_hub(testdata):
    from huggingface_hub import hf_hub_download

    failures = 0
    for fixture, repo in HUB.items():
        local = read_config(os.path.join(testdata, fixture))
        try:
            with open(hf_hub_download(repo, "tokenizer_config.json"), encoding="utf-8") as f:
                remote = json.load(f)
        except Exception as e:
            print(f"FAIL hub {fixture}: cannot fetch {repo}: {type(e).__name__}: {e}")
            failures += 1
            continue
        problems = []
        if local.get("chat_template") != remote.get("chat_template"):
            problems.append("chat_template differs")
        for key in SPECIAL_KEYS:
            if key in local and token_text(local[key]) != token_text(remote.get(key)):
                problems.append(f"{key}: committed {token_text(local[key])!r}, Hub {token_text(remote.get(key))!r}")
        if problems:
            print(f"FAIL hub {fixture} ({repo}): " + "; ".join(problems))
            failures += 1
        else:
            print(f"ok   hub {fixture} ({repo})")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--testdata", default=os.path.join(here, "..", "runtime", "tokenizer", "testdata", "chat"))
    parser.add_argument("--jinja2", action="store_true", help="render with jinja2 only, as transformers configures it")
    parser.add_argument("--hub", action="store_true", help="also compare the fixtures with their Hub checkpoints")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()

    manifest_path = os.path.join(args.testdata, "cases.json")
    try:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    except OSError as e:
        print(f"chat_template_hf: {e}", file=sys.stderr)
        return 2

    passed = failed = fallback = 0
    for case in manifest["cases"]:
        ok, path, detail = check_case(case, args.testdata, manifest["conversations"], args.jinja2)
        if path.startswith("jinja2") and not args.jinja2:
            fallback += 1
        if ok:
            passed += 1
            if args.verbose:
                print(f"ok   {case['name']} [{path}]: {detail}")
        else:
            failed += 1
            print(f"FAIL {case['name']} [{path}]: {detail}")
    if args.hub:
        hub_failures = check_hub(args.testdata)
        failed += hub_failures
        passed += len(HUB) - hub_failures
    if fallback:
        print(f"note: {fallback} case(s) rendered with jinja2, not apply_chat_template")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
