// Bounded YAML: limits that keep a hostile or careless document from crashing or exhausting the process.
//
// yaml-cpp builds a graph, not a tree: an alias shares its anchor's node, so a self-referencing alias
// (`a: &x [*x]`) is a cycle that every recursive walk follows until the stack overflows, and nested aliases
// ("billion laughs") make a few lines stand for billions of nodes. CheckYamlBounds reads the parser's events
// before any node is built and refuses such documents; CopyTree then turns the (finite, acyclic) graph into
// a tree in which no two places share a node, so writing one value never changes another.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"

namespace tmx {

// Limits on one YAML document and on the ${...} interpolation of a config. A torchtune config has a few
// hundred nodes, nesting of four levels and a handful of references; the defaults leave room for far larger
// ones while keeping the worst case to a fraction of a second and a few megabytes.
struct YamlLimits {
  // Nodes (keys, values and list items) with every alias expanded into a copy of its anchor's content.
  int64_t max_nodes = 100000;
  // Levels of nested mappings and lists, counted with aliases expanded.
  int max_depth = 64;
  // Bytes of strings that ${...} interpolation may produce in one config, all keys together.
  int64_t max_interpolated_bytes = int64_t{1} << 20;
  // ${...} references that interpolation may substitute in one config.
  int64_t max_interpolation_refs = 10000;
  // Keys in one chain of references (a refers to b, which refers to c, ...).
  int max_reference_chain = 64;
  // Documents in one text, for readers of every document (CheckYamlBoundsAllDocuments).
  int max_documents = 100;
};

// Names where a mark is, e.g. "configs/a.yaml:3:7" or "override 'x=[1' at column 4".
using MarkLocator = std::function<std::string(const YAML::Mark&)>;

// Reads `text`, one YAML document, as parser events and refuses, with InvalidArgument naming the place
// (through `where`) and the limit, a document whose aliases refer to a node that contains them, that holds
// more than `limits.max_nodes` nodes or nests deeper than `limits.max_depth` once aliases are expanded, and a
// second document (YAML::Load reads the first and ignores the rest without a word).
// Malformed YAML is not reported here (it returns OK): the caller's YAML::Load reports it in its own words.
Status CheckYamlBounds(const std::string& text, const MarkLocator& where, const YamlLimits& limits = {});

// CheckYamlBounds over every document of `text`, for callers that read them all with YAML::LoadAll; the
// node limit counts all documents together. Also refuses more than `limits.max_documents` documents:
// yaml-cpp 0.7 reads a ',' where a document should start as an endless run of empty documents, so
// YAML::LoadAll on such a text never returns and exhausts memory.
Status CheckYamlBoundsAllDocuments(const std::string& text, const MarkLocator& where, const YamlLimits& limits = {});

// A copy of `node` in which every alias is expanded into its own nodes. Marks are not kept.
// REQUIRES: `node` is acyclic (CheckYamlBounds accepted the text it was loaded from).
YAML::Node CopyTree(const YAML::Node& node);

// The number of nodes in `node` counting keys, values and items (shared nodes once per place).
// REQUIRES: `node` is acyclic.
int64_t CountNodes(const YAML::Node& node);

}  // namespace tmx
