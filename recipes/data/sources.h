// Dataset sources: the records of a torchtune dataset `source`, read from local files only, never the network.
// Torch-free.
//
//   source: json | jsonl | csv | text, with data_files   the named local files (Hugging Face's local builders)
//   source: <hub id>, e.g. yahma/alpaca-cleaned         the files in $TUNE_MATRIX_DATA/<hub id>/ (default
//                                                       ~/.cache/tune-matrix/datasets/<hub id>/), else in the
//                                                       datasets shipped with tune-matrix (ShippedDatasetsDir(),
//                                                       e.g. tune-matrix/tiny_instruct), under data_dir
//                                                       when given: every .json/.jsonl/.csv/.txt file there whose
//                                                       name or folder starts with the split's name ("train.jsonl",
//                                                       "data/train-00000-of-00001.json"), or all of them when none
//                                                       is named after a split and the split is "train"
//   source: a local folder                              the same, in that folder
// split: "train", or a slice "train[:100]", "train[10:20]", "train[:10%]" (Hugging Face's slicing).
// A missing folder or file is NotFound saying exactly what is missing and where to put it. A dataset folder is
// walked with WalkFolder (base/folder.h): hidden entries skipped, linked folders entered, each folder once (a
// link loop is InvalidArgument naming the link); each file is read within DatasetInput()'s limit
// (base/input_file.h).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "harness/config_store.h"
#include "recipes/data/records.h"

namespace tmx::data {

struct SourceOptions {
  std::string source;
  std::vector<std::string> data_files;
  std::string data_dir;
  std::string split = "train";
};

using ::tmx::DatasetRoot;  // harness/config_store.h: $TUNE_MATRIX_DATA, else $HOME/.cache/tune-matrix/datasets

// The datasets shipped with tune-matrix, found beside the checkout's configs: recipes/data/datasets.
std::string ShippedDatasetsDir();

struct SourceFile {
  std::string path;
  std::string format;  // json, jsonl, csv or text
};

// The files that hold the split, in name order, found without reading them: the errors of a missing folder
// or file (NotFound, saying what is missing and where to put it) come from here.
StatusOr<std::vector<SourceFile>> ResolveSource(const SourceOptions& options);

// The records of the split, in file order (files in name order).
StatusOr<std::vector<Record>> LoadSource(const SourceOptions& options);

// "hub id yahma/alpaca-cleaned in /root/.cache/...", "json files a.json, b.json": for notes and messages.
std::string DescribeSource(const SourceOptions& options);

}  // namespace tmx::data
