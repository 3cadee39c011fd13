#include "recipes/data/tokenizers/sentencepiece.h"

#include <sentencepiece_processor.h>

#include "base/file_util.h"
#include "base/input_file.h"
#include "recipes/data/tokenizers/sentencepiece_model.h"

namespace tmx::data {

SentencePieceTokenizer::SentencePieceTokenizer() : processor_(new sentencepiece::SentencePieceProcessor()) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Load(const SentencePieceOptions& options) {
  // Read here, through the one guarded open, rather than by SentencePiece from the path: a FIFO named
  // tokenizer.model is refused instead of blocking the load.
  StatusOr<std::string> model = ReadFile(options.path, TokenizerInput());
  if (model.status().code() == Status::Code::kNotFound) {
    return Status::NotFound(options.path +
                            ": no such file; fix: set path to the model's SentencePiece "
                            "tokenizer.model");
  }
  if (!model.ok()) return model.status();
  // Read and checked here first: the library (0.1.97) trusts the normalizer's character map and would crash on a
  // damaged one at the first text.
  StatusOr<SentencePieceModelInfo> info = ParseSentencePieceModel(*model, options.path);
  if (!info.ok()) return info.status();
  std::unique_ptr<SentencePieceTokenizer> tok(new SentencePieceTokenizer());
  sentencepiece::util::Status loaded = tok->processor_->LoadFromSerializedProto(*model);
  if (!loaded.ok()) {
    return Status::InvalidArgument(options.path + ": not a SentencePiece model (" + loaded.ToString() +
                                   "); fix: give the model's SentencePiece tokenizer.model, not a tokenizer.json "
                                   "or a tiktoken file");
  }
  const sentencepiece::SentencePieceProcessor& sp = *tok->processor_;
  if (info->model_type == SentencePieceModelInfo::ModelType::kUnigram) {
    tok->unigram_ = std::make_unique<UnigramSegmenter>(*info);
    tok->byte_of_id_.assign(info->pieces.size(), -1);
    if (info->byte_fallback) tok->id_of_byte_.assign(256, sp.unk_id());
    for (int id = 0; id < sp.GetPieceSize(); ++id) {
      const std::string& piece = info->pieces[static_cast<size_t>(id)].text;
      if (!sp.IsByte(id) || piece.size() != 6 || piece.compare(0, 3, "<0x") != 0) continue;
      int byte = std::stoi(piece.substr(3, 2), nullptr, 16);  // the library accepted it: "<0xNN>"
      tok->byte_of_id_[static_cast<size_t>(id)] = byte;
      if (!tok->id_of_byte_.empty()) tok->id_of_byte_[static_cast<size_t>(byte)] = id;
    }
  }
  tok->bos_id_ = options.bos_id != kNoId ? options.bos_id : sp.bos_id();
  tok->eos_id_ = options.eos_id != kNoId ? options.eos_id : sp.eos_id();
  tok->pad_id_ = options.pad_id != kNoId ? options.pad_id : sp.pad_id();
  tok->model_bos_id_ = sp.bos_id();
  tok->model_eos_id_ = sp.eos_id();
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    if (sp.IsControl(id)) tok->special_tokens_[sp.IdToPiece(id)] = id;
  }
  for (const auto& [text, id] : options.extra_special_tokens) {
    tok->special_tokens_[text] = id;
    if (id >= sp.GetPieceSize()) tok->extra_by_id_[id] = text;
  }
  for (const char* c : {" ", "\n", "\t", "\r", "\v"}) {
    if (!tok->EncodePlain(c).empty()) tok->encodes_whitespace_ = true;
  }
  tok->newline_prefix_len_ = tok->EncodePlain("\n").size();
  return tok;
}

std::vector<int64_t> SentencePieceTokenizer::EncodePlain(std::string_view text) const {
  if (!unigram_) {
    std::vector<int> ids;
    processor_->Encode(std::string(text), &ids);  // fails only when no model is loaded
    return std::vector<int64_t>(ids.begin(), ids.end());
  }
  // The normalized text is what the library's pieces spell (a byte-fallback piece spells its byte); it is
  // segmented again with 0.2.x's tie-breaking, then unknown runs become bytes or one unknown id as the library's
  // PopulateSentencePieceText makes them.
  const sentencepiece::ImmutableSentencePieceText encoded = processor_->EncodeAsImmutableProto(std::string(text));
  std::string normalized;
  for (const auto& piece : encoded.pieces()) {  // views into `encoded`
    int byte = byte_of_id_[piece.id()];
    if (byte >= 0) {
      normalized.push_back(static_cast<char>(byte));
    } else {
      normalized += piece.piece();
    }
  }
  std::vector<int64_t> ids;
  bool previous_unknown = false;
  for (const auto& [piece, id] : unigram_->Segment(normalized)) {
    const bool unknown = id == unigram_->unk_id();
    if (unknown && !id_of_byte_.empty()) {
      for (char c : piece) ids.push_back(id_of_byte_[static_cast<uint8_t>(c)]);
    } else if (!(unknown && previous_unknown)) {
      ids.push_back(id);
    }
    previous_unknown = unknown;
  }
  return ids;
}

std::vector<int64_t> SentencePieceTokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int64_t> ids;
  if (options.add_bos) ids.push_back(model_bos_id_);
  std::vector<int64_t> body;
  if (options.trim_leading_whitespace && encodes_whitespace_) {
    body = EncodePlain("\n" + std::string(text));
    body.erase(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(std::min(newline_prefix_len_, body.size())));
  } else {
    body = EncodePlain(text);
  }
  ids.insert(ids.end(), body.begin(), body.end());
  if (options.add_eos) ids.push_back(model_eos_id_);
  return ids;
}

std::string SentencePieceTokenizer::Decode(const std::vector<int64_t>& ids, bool skip_special) const {
  std::string out;
  std::vector<int> run;
  auto flush = [&] {
    std::string text;
    processor_->Decode(run, &text);
    out += text;
    run.clear();
  };
  for (int64_t id : ids) {
    auto extra = extra_by_id_.find(id);
    if (extra != extra_by_id_.end() || id < 0 || id >= processor_->GetPieceSize()) {
      flush();
      if (extra == extra_by_id_.end()) {
        out += "<|unk:" + std::to_string(id) + "|>";
      } else if (!skip_special) {
        out += extra->second;
      }
    } else if (!(skip_special && processor_->IsControl(static_cast<int>(id)))) {
      run.push_back(static_cast<int>(id));
    }
  }
  flush();
  return out;
}

std::string SentencePieceTokenizer::Piece(int64_t id) const {
  auto extra = extra_by_id_.find(id);
  if (extra != extra_by_id_.end()) return extra->second;
  if (id < 0 || id >= processor_->GetPieceSize()) return "<|unk:" + std::to_string(id) + "|>";
  return processor_->IdToPiece(static_cast<int>(id));
}

int64_t SentencePieceTokenizer::vocab_size() const { return processor_->GetPieceSize(); }

}  // namespace tmx::data
