#!/usr/bin/env python3
"""Writes the expected token ids that the C++ tokenizer, chat-format and dataset tests compare with.

The ids come from the reference implementations, never from tune-matrix: tiktoken, sentencepiece and Hugging Face
`tokenizers`, driven by torchtune's own tokenizer, template, message-transform and packing code (torchtune's source
at commit bd2a0fc7c314, the commit the sample files in recipes/data/samples/ come from).

Pinned versions (Python 3.11):
    tiktoken==0.14.0 sentencepiece==0.2.3 tokenizers==0.23.3 regex==2026.11.15 jinja2==3.1.6 omegaconf==2.3.0
and torch (any 2.x, only torchtune's packing imports it).

Run it in a throw-away virtual environment outside the checkout, e.g.:
    python3 -m venv /tmp/tok-venv
    /tmp/tok-venv/bin/pip install tiktoken==0.14.0 sentencepiece==0.2.3 tokenizers==0.23.3 \
        regex==2026.11.15 jinja2==3.1.6 omegaconf==2.3.0 torch
    git clone https://github.com/pytorch/torchtune /tmp/torchtune && git -C /tmp/torchtune checkout bd2a0fc7c314
    /tmp/tok-venv/bin/python scripts/make_tokenizer_fixtures.py --torchtune /tmp/torchtune
torchtune is imported from its source tree without its package __init__ (which needs torchao, datasets, ...):
modules it imports only for training (torchao, datasets, PIL, ...) are replaced by inert stubs, which the
tokenizers never call.

Input: the sample tokenizers and datasets in recipes/data/samples/, and the full-size byte-level BPE vocabulary\nrecipes/data/testdata/qwen2_{vocab.json,merges.txt} (torchtune's tests/assets/vocab.json and merges.txt).\nOutput (committed): recipes/data/testdata/{tokenizer_ids,chat_formats,datasets,packing}.json, and\nrecipes/data/testdata/tokenizer_byte_fallback.json (the Gemma sample with byte tokens added, an input).
`--check` exits 1 when a committed file differs from what the script makes.
"""
import argparse
import importlib.abc
import importlib.machinery
import json
import os
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(ROOT, "recipes", "data", "samples")
TOK = os.path.join(SAMPLES, "tokenizers")
DATA = os.path.join(SAMPLES, "datasets")
OUT = os.path.join(ROOT, "recipes", "data", "testdata")

# The corpus: Unicode (composed and decomposed), emoji (ZWJ sequences, flags), CJK, other scripts, whitespace
# runs, numbers, code, contractions, control characters and the special tokens' text.
CORPUS = [
    "Hello world!",
    "I can see the sun. But even if I cannot see the sun, I know that it exists.",
    "Ünïcödé façade naïve café — “quotes” ‘single’ … ©®™ ½ ∑ ∞",
    "cafe\u0301 re\u0301sume\u0301 A\u030a",
    "I \u2764\ufe0f \U0001f999\U0001f525 family: \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 flag: \U0001f1eb\U0001f1f7",
    "你好，世界！日本語のテキスト。한국어 텍스트",
    "Ελληνικά Русский עברית العربية हिन्दी ไทย",
    "a  b   c\t\td\n\n\ne    \n  f   ",
    "1234567890 3.14159 -42 1,000,000 2024-06-01 0x1F ١٢٣",
    "def f(x):\n    return x**2  # square\n",
    "I'm sure you've seen it; THEY'LL say it's DONE, we'd agree.",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<|im_start|>user\nhello<|im_end|>\n<|endoftext|>",
    "tab\there\rcarriage\x0bvertical\x0cfeed\u00a0nbsp\u2003emspace",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa !!!!!!!!!!!!!!!! ................",
    "  leading spaces and trailing   ",
    "x\x1cy\x1dz\x85w\u2028v\u2029u\u200bt\ufeffs \u00bd\u00b2\u00b3 \u2167 \u2460 e\u0301\u0327 \U0001d400",
    " ",
    "\n",
    "",
]

CONVERSATIONS = {
    "single_turn": [
        {"role": "user", "content": "What is the meaning of life?"},
        {"role": "assistant", "content": "The meaning of life is 42."},
    ],
    "system_multi_turn": [
        {"role": "system", "content": "You are an AI assistant."},
        {"role": "user", "content": "What is the meaning of life?"},
        {"role": "assistant", "content": "The meaning of life is 42."},
        {"role": "user", "content": "That's ridiculous.\n\nReally?"},
        {"role": "assistant", "content": "I agree.  "},
    ],
}


def install_torchtune(src):
    class Anything:
        def __init__(self, *a, **k):
            pass

        def __call__(self, *a, **k):
            return a[0] if len(a) == 1 and callable(a[0]) else Anything()

        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Anything()

        def __getitem__(self, k):
            return Anything()

        def __class_getitem__(cls, k):
            return cls

    class Stub(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return type(name, (Anything,), {})

    class StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        STUBBED = ("torchao", "torchdata", "datasets", "huggingface_hub", "PIL", "safetensors", "kagglehub",
                   "psutil", "tqdm", "numpy", "blobfile", "torchvision")

        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in self.STUBBED:
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec):
            module = Stub(spec.name)
            module.__path__ = []
            return module

        def exec_module(self, module):
            pass

    sys.meta_path.insert(0, StubFinder())
    package = types.ModuleType("torchtune")
    package.__path__ = [os.path.join(src, "torchtune")]
    sys.modules["torchtune"] = package


def tok_path(name):
    return os.path.join(TOK, name)


def family_tokenizers(max_seq_len=None):
    from torchtune.models.gemma import gemma_tokenizer
    from torchtune.models.llama2 import llama2_tokenizer
    from torchtune.models.llama3 import llama3_tokenizer
    from torchtune.models.mistral import mistral_tokenizer
    from torchtune.models.phi3 import phi3_mini_tokenizer
    from torchtune.models.qwen2 import qwen2_tokenizer
    from torchtune.models.qwen2_5 import qwen2_5_tokenizer
    from torchtune.models.qwen3 import qwen3_tokenizer

    sp, vocab, merges = tok_path("m.model"), tok_path("tiny_bpe_vocab.json"), tok_path("tiny_bpe_merges.txt")
    return {
        "llama3_tokenizer": llama3_tokenizer(tok_path("tiktoken_small.model"), max_seq_len=max_seq_len),
        "llama2_tokenizer": llama2_tokenizer(sp, max_seq_len=max_seq_len),
        "mistral_tokenizer": mistral_tokenizer(sp, max_seq_len=max_seq_len),
        "gemma_tokenizer": gemma_tokenizer(sp, max_seq_len=max_seq_len),
        "phi3_mini_tokenizer": phi3_mini_tokenizer(sp, max_seq_len=max_seq_len),
        "qwen2_tokenizer": qwen2_tokenizer(vocab, merges, max_seq_len=max_seq_len),
        "qwen2_5_tokenizer": qwen2_5_tokenizer(vocab, merges, max_seq_len=max_seq_len),
        "qwen3_tokenizer": qwen3_tokenizer(vocab, merges, max_seq_len=max_seq_len),
    }


def encode_cases(encode):
    # torchtune's Qwen2Tokenizer yields None for a symbol missing from the vocabulary when there is no unk token
    # (the tiny sample vocabulary lacks a few bytes); tune-matrix drops it, as Hugging Face's BPE does. The
    # fixtures record the ids without the Nones and count them in "dropped".
    cases = []
    for t in CORPUS:
        ids = encode(t)
        cases.append({"text": t, "ids": [int(i) for i in ids if i is not None]})
        if None in ids:
            cases[-1]["dropped"] = ids.count(None)
    return cases


def make_tokenizer_ids():
    import tiktoken
    import sentencepiece
    import tokenizers
    from torchtune.models.qwen2 import qwen2_tokenizer

    toks = family_tokenizers()
    llama3, llama2, phi3, qwen2 = (toks[k] for k in ("llama3_tokenizer", "llama2_tokenizer", "phi3_mini_tokenizer",
                                                     "qwen2_tokenizer"))
    out = {"versions": {"tiktoken": tiktoken.__version__, "sentencepiece": sentencepiece.__version__,
                        "tokenizers": tokenizers.__version__, "torchtune": "bd2a0fc7c314"}}
    out["tiktoken"] = {
        "file": "tiktoken_small.model", "base_vocab_size": llama3.base_vocab_size, "vocab_size": llama3.vocab_size,
        "bos_id": llama3.bos_id, "eos_id": llama3.eos_id, "pad_id": llama3.pad_id,
        "cases": encode_cases(lambda t: llama3.encode(t, add_bos=False, add_eos=False)),
        "with_bos_eos": encode_cases(lambda t: llama3.encode(t, add_bos=True, add_eos=True)),
    }
    out["sentencepiece"] = {
        "file": "m.model", "vocab_size": llama2.vocab_size, "bos_id": llama2.bos_id, "eos_id": llama2.eos_id,
        "cases": encode_cases(lambda t: llama2.encode(t, add_bos=False, add_eos=False)),
        "with_bos_eos": encode_cases(lambda t: llama2.encode(t, add_bos=True, add_eos=True)),
        "trim_leading_whitespace": encode_cases(
            lambda t: llama2.encode(t, add_bos=False, add_eos=False, trim_leading_whitespace=True)),
        "decode": [{"ids": c["ids"], "text": llama2.decode(c["ids"])} for c in
                   encode_cases(lambda t: llama2.encode(t, add_bos=False, add_eos=False))],
    }
    out["phi3"] = {"eos_id": phi3.eos_id, "pad_id": phi3.pad_id, "bos_id": phi3.bos_id}
    out["byte_bpe"] = {
        "vocab": "tiny_bpe_vocab.json", "merges": "tiny_bpe_merges.txt",
        "cases": encode_cases(lambda t: qwen2.encode(t, add_bos=False, add_eos=False)),
        "decode": [{"ids": c["ids"], "text": qwen2.decode(c["ids"])} for c in
                   encode_cases(lambda t: qwen2.encode(t, add_bos=False, add_eos=False))],
    }
    full = qwen2_tokenizer(os.path.join(OUT, "qwen2_vocab.json"), os.path.join(OUT, "qwen2_merges.txt"))
    out["byte_bpe_full"] = {
        "vocab": "qwen2_vocab.json", "merges": "qwen2_merges.txt",
        "cases": encode_cases(lambda t: full.encode(t, add_bos=False, add_eos=False)),
        "decode": [{"ids": c["ids"], "text": full.decode(c["ids"])} for c in
                   encode_cases(lambda t: full.encode(t, add_bos=False, add_eos=False))],
    }
    hf = tokenizers.Tokenizer.from_file(tok_path("tiny_bpe_tokenizer.json"))
    out["hf_tiny_bpe"] = {"file": "tiny_bpe_tokenizer.json",
                          "cases": encode_cases(lambda t: hf.encode(t).ids)}
    hf = tokenizers.Tokenizer.from_file(tok_path("tokenizer_gemma_cropped.json"))
    out["hf_gemma_cropped"] = {"file": "tokenizer_gemma_cropped.json",
                               "cases": encode_cases(lambda t: hf.encode(t).ids),
                               "decode": [{"ids": c["ids"], "text": hf.decode(c["ids"], skip_special_tokens=False)}
                                          for c in encode_cases(lambda t: hf.encode(t).ids)]}
    # The same with the 256 "<0xAB>" byte tokens appended to its vocabulary, so byte fallback has tokens to use.
    with open(tok_path("tokenizer_gemma_cropped.json"), encoding="utf-8") as f:
        doc = json.load(f)
    vocab = doc["model"]["vocab"]
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    fallback_path = os.path.join(OUT, "tokenizer_byte_fallback.json")
    with open(fallback_path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    hf = tokenizers.Tokenizer.from_file(fallback_path)
    out["hf_byte_fallback"] = {"file": "tokenizer_byte_fallback.json",
                               "cases": encode_cases(lambda t: hf.encode(t).ids),
                               "decode": [{"ids": c["ids"], "text": hf.decode(c["ids"], skip_special_tokens=False)}
                                          for c in encode_cases(lambda t: hf.encode(t).ids)]}
    hf = tokenizers.Tokenizer.from_file(tok_path("tokenizer.json"))
    out["hf_tokenizer_json"] = {"file": "tokenizer.json", "cases": encode_cases(lambda t: hf.encode(t).ids)}
    # HuggingFaceBaseTokenizer is compared with torchtune 0.6.1's (scripts/make_torchtune_0_6_1_fixtures.py).
    return out


def to_messages(conversation, masking_strategy):
    from torchtune.data import Message
    from torchtune.data._messages import mask_messages

    messages = [Message(role=m["role"], content=m["content"]) for m in conversation]
    mask_messages(messages, masking_strategy)
    return messages


def tokenize(tok, messages):
    # The model tokenizer's __call__, as SFTDataset uses it for training samples.
    sample = tok({"messages": messages})
    return sample["tokens"], sample["mask"]


def make_chat_families(max_seq_len=None):
    # Phi-3's chat cases come from torchtune 0.6.1 (scripts/make_torchtune_0_6_1_fixtures.py): its rules changed
    # after it.
    return {k: v for k, v in family_tokenizers(max_seq_len).items() if k != "phi3_mini_tokenizer"}


def make_chat_formats():
    from torchtune.data import GrammarErrorCorrectionTemplate, QuestionAnswerTemplate, SummarizeTemplate
    out = []
    for max_seq_len in (None, 24):
        for family, tok in make_chat_families(max_seq_len).items():
            for name, conversation in CONVERSATIONS.items():
                if family == "mistral_tokenizer" and conversation[0]["role"] == "system":
                    continue  # MistralChatTemplate refuses system prompts (tested separately in C++)
                for strategy in ("train_on_assistant", "train_on_all", "train_on_last"):
                    tokens, mask = tokenize(tok, to_messages(conversation, strategy))
                    out.append({"tokenizer": family, "conversation": name, "masking_strategy": strategy,
                                "max_seq_len": max_seq_len, "prompt_template": None,
                                "tokens": [int(t) for t in tokens], "mask": [bool(m) for m in mask]})
    templates = {"torchtune.data.GrammarErrorCorrectionTemplate": GrammarErrorCorrectionTemplate,
                 "torchtune.data.SummarizeTemplate": SummarizeTemplate,
                 "torchtune.data.QuestionAnswerTemplate": QuestionAnswerTemplate}
    for template_name, template in templates.items():
        for family, tok in make_chat_families().items():
            if family in ("llama2_tokenizer", "mistral_tokenizer"):
                continue
            tok.prompt_template = template()
            tokens, mask = tokenize(tok, to_messages(CONVERSATIONS["single_turn"], "train_on_assistant"))
            out.append({"tokenizer": family, "conversation": "single_turn", "masking_strategy": "train_on_assistant",
                        "max_seq_len": None, "prompt_template": template_name,
                        "tokens": [int(t) for t in tokens], "mask": [bool(m) for m in mask]})
    return out


def aligned_labels(tokens, mask):
    # tune-matrix's Sample keeps labels aligned with tokens (the recipe shifts); torchtune's SFTTransform stores
    # them shifted. Either way a position is trained on exactly when its mask is False.
    return [-100 if m else int(t) for t, m in zip(tokens, mask)]


def make_datasets():
    from torchtune.data import (AlpacaToMessages, ChosenRejectedToMessages, InputOutputToMessages,
                                OpenAIToMessages, ShareGPTToMessages)
    from torchtune.datasets._stack_exchange_paired import StackExchangePairedToMessages

    tok = family_tokenizers(max_seq_len=64)["llama3_tokenizer"]

    def load(name):
        path = os.path.join(DATA, name)
        with open(path, encoding="utf-8") as f:
            if name.endswith(".jsonl"):
                return [json.loads(line) for line in f if line.strip()]
            return json.load(f)

    def sft(name, transform, records):
        samples = []
        for record in records:
            tokens, mask = tokenize(tok, transform(record)["messages"])
            samples.append({"tokens": [int(t) for t in tokens], "labels": aligned_labels(tokens, mask)})
        return {"dataset": name, "samples": samples}

    def preference(name, transform, records):
        samples = []
        for record in records:
            msgs = transform(record)
            pair = {}
            for side in ("chosen", "rejected"):
                tokens, mask = tok.tokenize_messages(msgs[side])
                pair[side + "_tokens"] = [int(t) for t in tokens]
                pair[side + "_labels"] = aligned_labels(tokens, mask)
            samples.append(pair)
        return {"dataset": name, "samples": samples}

    alpaca = load("alpaca_sample.json")[:4]
    out = [
        sft("alpaca_dataset", AlpacaToMessages(train_on_input=True), alpaca),
        sft("alpaca_dataset/train_on_input=False", AlpacaToMessages(train_on_input=False), alpaca),
        sft("slimorca_dataset", ShareGPTToMessages(train_on_input=False), load("sharegpt_sample.json")),
        sft("chat_dataset/openai", OpenAIToMessages(train_on_input=False, column_map={"messages": "messages"}),
            load("openai_sample.jsonl")),
        sft("instruct_dataset", InputOutputToMessages(
            train_on_input=False, column_map={"input": "instruction", "output": "response"},
            new_system_prompt="Answer briefly."), load("instruct_sample.json")),
        preference("hh_rlhf_helpful_dataset", ChosenRejectedToMessages(train_on_input=False),
                   load("hh_rlhf_sample.json")),
        preference("stack_exchange_paired_dataset", StackExchangePairedToMessages(
            train_on_input=False, column_map={"prompt": "question", "chosen": "response_j",
                                              "rejected": "response_k"}), load("stack_exchange_paired_sample.json")),
    ]
    texts = [line for line in open(os.path.join(DATA, "text_sample.txt"), encoding="utf-8").read().split("\n") if line]
    samples = []
    for text in texts:
        tokens = tok.encode(text, add_bos=True, add_eos=True)[: tok.max_seq_len - 1]
        samples.append({"tokens": tokens, "labels": list(tokens)})
    out.append({"dataset": "text_completion_dataset", "samples": samples})
    return out


def make_packing():
    from torchtune.datasets._packed import PackedDataset
    samples = [[1, 2, 3], [4, 5, 6, 7, 8], [9, 10], [11, 12, 13, 14], [15], [16, 17, 18, 19, 20, 21, 22, 23, 24]]
    ds = [{"tokens": s, "labels": [t + 100 for t in s]} for s in samples]
    out = []
    for split in (True, False):
        usable = ds if split else ds[:5]
        packed = PackedDataset(usable, max_seq_len=8, padding_idx=0, split_across_pack=split)
        packs = [{k: [int(x) for x in pack[k].tolist()] for k in ("tokens", "labels", "input_pos", "seq_lens")}
                 for pack in packed.packs]
        out.append({"samples": [s["tokens"] for s in usable], "labels_offset": 100, "max_seq_len": 8,
                    "split_across_pack": split, "packs": packs})
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--torchtune", required=True, help="torchtune source checkout at bd2a0fc7c314")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    install_torchtune(args.torchtune)
    files = {"tokenizer_ids.json": make_tokenizer_ids(), "chat_formats.json": make_chat_formats(),
             "datasets.json": make_datasets(), "packing.json": make_packing()}
    stale = []
    for name, value in files.items():
        text = json.dumps(value, ensure_ascii=False, indent=1) + "\n"
        path = os.path.join(OUT, name)
        if args.check:
            if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
                stale.append(path)
        else:
            os.makedirs(OUT, exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    if stale:
        print("stale fixtures (rerun without --check):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
