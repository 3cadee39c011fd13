#!/usr/bin/env python3
"""Writes recipes/data/testdata/torchtune_0_6_1.json: the ids torchtune 0.6.1 (the release tune-matrix's tokenizers
match) makes with every tokenizer tune-matrix shares with it, plain and chat, on a varied corpus; the C++ tests
(recipes/data/chat_format_test.cc, tokenizers/sentencepiece_test.cc, tokenizers/hf_tokenizer_test.cc) compare.

Pinned versions (Python 3.11), what `pip install torchtune==0.6.1` resolves today: torchtune==0.6.1
sentencepiece==0.2.3 tiktoken==0.14.0 tokenizers==0.23.3 torchao==0.11.0 (torchtune imports torch, torchao,
datasets and omegaconf; the tokenizers never call them). Run it once in a throw-away virtual environment outside
the checkout:
    python3 -m venv /tmp/ref-venv
    /tmp/ref-venv/bin/pip install --no-deps torchtune==0.6.1 torchao==0.11.0
    /tmp/ref-venv/bin/pip install sentencepiece==0.2.3 tiktoken==0.14.0 tokenizers==0.23.3 datasets omegaconf \
        torch protobuf
    /tmp/ref-venv/bin/python scripts/make_torchtune_0_6_1_fixtures.py
`--check` exits 1 when the committed file differs from what the script makes.

Families: llama2, mistral, gemma and phi3_mini on torchtune's SentencePiece test model (m.model, a unigram model),
llama3 on its tiktoken test model, qwen2, qwen2_5 and phi4 on its tiny byte-level BPE (the files torchtune's own
Qwen2 and Phi-4 tests use; Phi-4's GPT2BaseTokenizer skips the first line of merges.txt, here a merge), and
HuggingFaceBaseTokenizer on the shipped tokenizer.json. Qwen3's tokenizer is newer than 0.6.1 (scripts/make_tokenizer_fixtures.py compares it
with torchtune's main branch). Besides the families, "sentencepiece" holds sentencepiece 0.2.3's own ids for
m.model and for two small models trained here with byte fallback and user-defined symbols (a unigram and a BPE
one, recipes/data/testdata/sp_{unigram,bpe}_byte_fallback.model, trained once from the shipped sample datasets;
`--retrain` makes them again), on the corpus and on texts whose segmentation is a tie between two paths of equal
score, where sentencepiece 0.1.97 (Debian's library) chose differently: TIES below were found by encoding 100,000
random strings with both versions and keeping the shortest that differ.
"""
import argparse
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOK = os.path.join(ROOT, "recipes", "data", "samples", "tokenizers")
DATA = os.path.join(ROOT, "recipes", "data", "samples", "datasets")
TESTDATA = os.path.join(ROOT, "recipes", "data", "testdata")
OUT = os.path.join(TESTDATA, "torchtune_0_6_1.json")
TRAINED = {"unigram": "sp_unigram_byte_fallback.model", "bpe": "sp_bpe_byte_fallback.model"}

# Whitespace runs, numbers, code, emoji (ZWJ, flags), CJK and other scripts, composed and decomposed Unicode,
# control characters, and text that looks like every family's special tokens (encoded as ordinary text).
CORPUS = [
    "Hello world!",
    "",
    " ",
    "\n",
    "  leading and trailing  ",
    "a  b   c\t\td\n\n\ne    \n  f   ",
    "I can see the sun. But even if I cannot see the sun, I know that it exists.",
    "1234567890 3.14159 -42 1,000,000 2024-06-01 0x1F \u0661\u0662\u0663",
    "def f(x):\n    return x**2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "I'm sure you've seen it; THEY'LL say it's DONE, we'd agree.",
    "I \u2764\ufe0f \U0001f999\U0001f525 family: \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 flag: "
    "\U0001f1eb\U0001f1f7",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3002\ud55c\uad6d\uc5b4",
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u05e2\u05d1\u05e8\u05d9\u05ea "
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0939\u093f\u0928\u094d\u0926\u0940 \u0e44\u0e17\u0e22",
    "caf\u00e9 na\u00efve \u2014 \u201cquotes\u201d \u2018single\u2019 \u2026 \u00a9\u00ae\u2122 \u00bd \u2211 \u221e",
    "cafe\u0301 re\u0301sume\u0301 A\u030a",
    "tab\there\rcarriage\x0bvertical\x0cfeed\u00a0nbsp\u2003emspace",
    "x\x1cy\x1dz\x85w\u2028v\u2029u\u200bt\ufeffs \u00b2\u00b3 \u2167 \u2460 e\u0301\u0327 \U0001d400",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa !!!!!!!!!!!!!!!! ................ wwwwwww lll ---",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<|im_start|>user\nhello<|im_end|>\n<|endoftext|>",
    "<|user|>\nhi<|end|>\n<|assistant|>\nhello<|end|>\n<|endoftext|>",
    "<s>not a bos</s> <unk> <|system|> <|placeholder1|> <start_of_turn>user <end_of_turn> [INST] x [/INST] <bos>",
]

# For GPT2BaseTokenizer's pre-tokenizer (Phi-4), whose pieces the fixture records besides the corpus': where Python
# re's \w, \d and \s differ from PCRE2's and GPT-2's (underscores, letters with digits, combining marks, U+001C,
# U+0085, U+00A0, Unicode digits and numerals, contractions in capitals). The tiny vocabulary drops most of these
# bytes, so the ids alone would not show a wrong split.
PIECE_TEXTS = ["snake_case x2 __init__ \u0661\u0662\u0663x e\u0301\u0327 A\u030aB x\x1c\x1c y \x85\x85z \u00a0\u00a0a "
               "\u3000b I'M it's \u2167\u00b2 _\u200d_ \U0001d7ce9 \u0e01\u0e33",
               "a_1 __ 1_a 12_34 x\u00b9 \u00bd\u00bd  \t\n  end\u2028 \u2029\u00a0 'S'T're 've\n'll\u200b!"]

# Texts on which sentencepiece 0.1.97 and 0.2.3 segment m.model differently (ties; see the docstring).
TIES = ["V---", "b---", "4---", "a---", "Nlll", "9---", "Klll", "Plll", "\u4f60---", "3---", "jäwDqkccc",
        "4DCwww'F7Hn9Hip", "rldem lE03lD\U0001f642\u00dfpvwwwkji.5", "99\n\U0001f642r\U0001f642"
        "5Hynk\U0001f642hI\u00e9qu7www7zvl 82qzaxe", "zzzDsd\u00e9\u00e9eccc", "Elu\t\u00e4BDccccc",
        "\n\n\n\nreportccc", " commitccc,sD\u00e9k"]

CONVERSATIONS = {
    "single_turn": [
        ("user", "What is the meaning of life?"),
        ("assistant", "The meaning of life is 42."),
    ],
    "system_multi_turn": [
        ("system", "You are an AI assistant."),
        ("user", "What is the meaning of life?"),
        ("assistant", "The meaning of life is 42."),
        ("user", "That's ridiculous.\n\nReally?"),
        ("assistant", "I agree.  "),
    ],
    "corpus": [(("user", "assistant")[i % 2], t) for i, t in enumerate(CORPUS)],
}


def path(name):
    return os.path.join(TOK, name)


def families(max_seq_len=None):
    from torchtune.models.gemma import gemma_tokenizer
    from torchtune.models.llama2 import llama2_tokenizer
    from torchtune.models.llama3 import llama3_tokenizer
    from torchtune.models.mistral import mistral_tokenizer
    from torchtune.models.phi3 import phi3_mini_tokenizer
    from torchtune.models.phi4 import phi4_tokenizer
    from torchtune.models.qwen2 import qwen2_tokenizer
    from torchtune.models.qwen2_5 import qwen2_5_tokenizer

    sp, vocab, merges = path("m.model"), path("tiny_bpe_vocab.json"), path("tiny_bpe_merges.txt")
    return {
        "llama2_tokenizer": llama2_tokenizer(sp, max_seq_len=max_seq_len),
        "mistral_tokenizer": mistral_tokenizer(sp, max_seq_len=max_seq_len),
        "gemma_tokenizer": gemma_tokenizer(sp, max_seq_len=max_seq_len),
        "phi3_mini_tokenizer": phi3_mini_tokenizer(sp, max_seq_len=max_seq_len),
        "llama3_tokenizer": llama3_tokenizer(path("tiktoken_small.model"), max_seq_len=max_seq_len),
        "qwen2_tokenizer": qwen2_tokenizer(vocab, merges, max_seq_len=max_seq_len),
        "qwen2_5_tokenizer": qwen2_5_tokenizer(vocab, merges, max_seq_len=max_seq_len),
        "phi4_tokenizer": phi4_tokenizer(vocab_path=vocab, merges_path=merges, max_seq_len=max_seq_len),
    }


def ids(values):
    # torchtune's Qwen2Tokenizer and GPT2BaseTokenizer (Phi-4) yield None for a byte missing from the tiny
    # vocabulary; tune-matrix drops it,
    # as Hugging Face's BPE does (scripts/make_tokenizer_fixtures.py records the same).
    return [int(i) for i in values if i is not None]


def encode_cases(tok):
    return [{"text": t, "ids": ids(tok.encode(t, add_bos=False, add_eos=False)),
             "ids_with_bos_eos": ids(tok.encode(t, add_bos=True, add_eos=True))} for t in CORPUS]


def chat_cases(family):
    from torchtune.data import Message
    out = []
    for max_seq_len in (None, 24, 9):
        tok = families(max_seq_len)[family]
        for name, turns in CONVERSATIONS.items():
            if name == "corpus" and max_seq_len is not None:
                continue  # truncation is covered by the short conversations
            for train_on_input in (False, True):
                masked = [role != "assistant" and not train_on_input for role, _ in turns]
                messages = [Message(role=role, content=text, masked=m) for (role, text), m in zip(turns, masked)]
                try:
                    sample = tok({"messages": messages})  # what SFTDataset calls for a training sample
                except ValueError as error:  # Mistral's template refuses system prompts; C++ tests that apart
                    if "system" not in str(error).lower():
                        raise
                    continue
                out.append({"conversation": name, "max_seq_len": max_seq_len,
                            "messages": [{"role": role, "content": text, "masked": m}
                                         for (role, text), m in zip(turns, masked)],
                            "tokens": ids(sample["tokens"]),
                            "mask": [bool(m) for t, m in zip(sample["tokens"], sample["mask"]) if t is not None]})
    return out


def train_models(retrain):
    import sentencepiece as spm
    text = []
    for name in ("alpaca_sample.json", "stack_exchange_paired_sample.json"):
        for record in json.load(open(os.path.join(DATA, name), encoding="utf-8")):
            text.extend(str(v) for v in record.values())
    text.extend(CORPUS * 3)
    for model_type, name in TRAINED.items():
        target = os.path.join(TESTDATA, name)
        if os.path.exists(target) and not retrain:
            continue
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(text), model_prefix=target[:-len(".model")], vocab_size=700,
            model_type=model_type, byte_fallback=True, user_defined_symbols=["<|user|>", "[INST]", "ab"],
            character_coverage=0.98, normalization_rule_name="identity", num_threads=1, minloglevel=2)
        os.remove(target[:-len(".model")] + ".vocab")


def sentencepiece_cases():
    import sentencepiece as spm
    out = {}
    for name in ["m.model"] + list(TRAINED.values()):
        model = spm.SentencePieceProcessor(model_file=path(name) if name == "m.model" else
                                           os.path.join(TESTDATA, name))
        out[name] = [{"text": t, "ids": model.encode(t)} for t in CORPUS + TIES]
    return out


def make():
    import sentencepiece
    import torchtune
    from torchtune.modules.transforms.tokenizers import HuggingFaceBaseTokenizer

    out = {"versions": {"torchtune": torchtune.__version__, "sentencepiece": sentencepiece.__version__},
           "families": {}}
    from torchtune.modules.transforms.tokenizers import GPT2BaseTokenizer
    for family, tok in families().items():
        out["families"][family] = {"bos_id": tok.bos_id, "eos_id": tok.eos_id, "pad_id": tok.pad_id,
                                   "encode": encode_cases(tok), "chat": chat_cases(family)}
        if family == "phi4_tokenizer":  # its table is built in a loop around <|endofprompt|>
            out["families"][family]["special_tokens"] = tok.special_tokens
        if isinstance(getattr(tok, "tokenizer_model", None), GPT2BaseTokenizer):
            pat = tok.tokenizer_model.pat
            out["families"][family]["pre_tokenizer"] = {
                "pattern": pat.pattern, "cases": [{"text": t, "pieces": pat.findall(t)} for t in CORPUS + PIECE_TEXTS]}
    # Phi-4 on torchtune's full-size vocab.json/merges.txt test asset (recipes/data/testdata/qwen2_*; its first line
    # is "#version: 0.2"): every byte has a token there, so the non-ASCII text and its pre-tokenized split show in
    # the ids.
    from torchtune.models.phi4 import phi4_tokenizer
    phi4 = phi4_tokenizer(vocab_path=os.path.join(TESTDATA, "qwen2_vocab.json"),
                          merges_path=os.path.join(TESTDATA, "qwen2_merges.txt"))
    out["phi4_full_vocab"] = {"encode": [{"text": t, "ids": ids(phi4.encode(t, add_bos=False, add_eos=False))}
                                         for t in CORPUS + PIECE_TEXTS]}
    hf = HuggingFaceBaseTokenizer(path("tokenizer.json"), generation_config_path=path("generation_config.json"))
    out["hf_base_tokenizer"] = {"bos_id": hf.bos_id, "eos_id": hf.eos_id, "encode": encode_cases(hf)}
    out["sentencepiece"] = sentencepiece_cases()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--retrain", action="store_true", help="train the two small SentencePiece models again")
    args = parser.parse_args()
    train_models(args.retrain)
    text = json.dumps(make(), ensure_ascii=False, indent=1) + "\n"
    # One line per list of ids or mask flags: the file stays small and its diffs readable.
    text = re.sub(r"\[\n\s*([-0-9a-z, \n]*?)\n\s*\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    if args.check:
        if not os.path.exists(OUT) or open(OUT, encoding="utf-8").read() != text:
            print("stale fixture (rerun without --check):", OUT)
            return 1
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
