#include "recipes/data/multimodal.h"

#include "base/file_util.h"

namespace tmx::data {
namespace {

std::string Column(const DatasetOptions& options, const std::string& name) {
  auto it = options.column_map.find(name);
  return it == options.column_map.end() ? name : it->second;
}

std::string ImagePath(const DatasetOptions& options, const Record& record, const std::string& path) {
  if (!path.empty() && path.front() == '/') return path;
  std::string base = options.image_dir;
  if (base.empty() || base.front() != '/') base = ParentDir(record.path) + (base.empty() ? "" : "/" + base);
  return base + "/" + path;
}

// The record's image paths: a string or a list of strings.
StatusOr<std::vector<std::string>> ImagePaths(const DatasetComponent& c, const DatasetOptions& options,
                                              const Record& record) {
  const std::string column = Column(options, c.image_column);
  const auto it = record.value.find(column);
  std::vector<std::string> paths;
  if (it != record.value.end() && it->is_string()) paths.push_back(it->get<std::string>());
  if (it != record.value.end() && it->is_array()) {
    for (const auto& p : *it) {
      if (!p.is_string()) break;
      paths.push_back(p.get<std::string>());
    }
  }
  if (paths.empty() || (it->is_array() && paths.size() != it->size())) {
    return Status::InvalidArgument(record.where() + "column '" + column +
                                   "' must hold an image file's path (or a list of them); fix: set column_map to the "
                                   "column that does");
  }
  return paths;
}

// Marks where the images go: the first user message (the Cauldron, VQA) or the message with the "<image>" tag
// (LLaVA), whose tag is removed.
Status MarkImages(const DatasetComponent& c, const Record& record, size_t count, std::vector<Message>* messages) {
  const std::string tag = "<image>";
  for (Message& m : *messages) {
    if (c.style == MessageStyle::kShareGpt) {
      const std::string text = m.text();
      const size_t at = text.find(tag);
      if (at == std::string::npos) continue;
      std::string rest = text.substr(0, at) + text.substr(at + tag.size());
      while (!rest.empty() && (rest.front() == '\n' || rest.front() == ' ')) rest.erase(rest.begin());
      m.content = {rest};
    } else if (m.role != "user") {
      continue;
    }
    m.images = static_cast<int64_t>(count);
    return Status::OK();
  }
  return Status::InvalidArgument(record.where() + (c.style == MessageStyle::kShareGpt
                                                       ? "no message holds the <image> tag; fix: put it in the "
                                                         "message the image belongs to"
                                                       : "no user message to hold the image"));
}

}  // namespace

StatusOr<std::vector<Message>> CauldronMessages(const Record& record, const DatasetOptions& options) {
  const std::string column = Column(options, "texts");
  const auto texts = record.value.find(column);
  std::vector<Message> messages;
  if (options.new_system_prompt) messages.emplace_back("system", *options.new_system_prompt, true);
  const std::string bad = record.where() + "column '" + column +
                          "' must be a list of {user, assistant} strings; fix: set column_map.texts to the column "
                          "that holds them";
  if (texts == record.value.end() || !texts->is_array() || texts->empty()) return Status::InvalidArgument(bad);
  for (const auto& turn : *texts) {
    if (!turn.is_object() || !turn.contains("user") || !turn.contains("assistant") || !turn["user"].is_string() ||
        !turn["assistant"].is_string()) {
      return Status::InvalidArgument(bad);
    }
    messages.emplace_back("user", turn["user"].get<std::string>(), true);
    messages.emplace_back("assistant", turn["assistant"].get<std::string>(), false);
  }
  return messages;
}

StatusOr<std::vector<ImageTiles>> AttachImages(const DatasetComponent& component, const DatasetOptions& options,
                                               const ImageTransformOptions& transform, const Record& record,
                                               std::vector<Message>* messages) {
  StatusOr<std::vector<std::string>> paths = ImagePaths(component, options, record);
  if (!paths.ok()) return paths.status();
  TM_RETURN_IF_ERROR(MarkImages(component, record, paths->size(), messages));
  std::vector<ImageTiles> tiles;
  for (const std::string& path : *paths) {
    StatusOr<Image> image = ReadImage(ImagePath(options, record, path));
    if (!image.ok()) return image.status().WithContext(record.where() + "image " + path);
    tiles.push_back(TileImage(*image, transform));
  }
  return tiles;
}

}  // namespace tmx::data
