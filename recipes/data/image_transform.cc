#include "recipes/data/image_transform.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/file_util.h"
#include "recipes/data/png.h"

namespace tmx::data {
namespace {

// The next whitespace-separated header field of a PPM (comments from # to the end of the line skipped).
bool NextField(const std::string& text, size_t* pos, std::string* out) {
  while (*pos < text.size()) {
    if (text[*pos] == '#') {
      while (*pos < text.size() && text[*pos] != '\n') ++*pos;
    } else if (std::isspace(static_cast<unsigned char>(text[*pos]))) {
      ++*pos;
    } else {
      break;
    }
  }
  const size_t start = *pos;
  while (*pos < text.size() && !std::isspace(static_cast<unsigned char>(text[*pos]))) ++*pos;
  *out = text.substr(start, *pos - start);
  return !out->empty();
}

// One pass of the resize along an axis of `in` (`n_in` long) to `n_out`, for `lines` lines of `stride`-apart
// samples: Pillow's triangle filter, support widened by the shrink factor, weights normalised, rounded to 8 bits.
struct Pass {
  std::vector<int64_t> first;     // per output sample, the first input sample it reads
  std::vector<std::vector<double>> weights;
};

Pass MakePass(int64_t n_in, int64_t n_out) {
  Pass p;
  const double scale = static_cast<double>(n_in) / static_cast<double>(n_out);
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;
  for (int64_t i = 0; i < n_out; ++i) {
    const double center = (static_cast<double>(i) + 0.5) * scale;
    const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(center - support + 0.5));
    const int64_t hi = std::min<int64_t>(n_in, static_cast<int64_t>(center + support + 0.5));
    std::vector<double> w;
    double total = 0;
    for (int64_t j = lo; j < hi; ++j) {
      const double x = (static_cast<double>(j) - center + 0.5) / filter_scale;
      const double v = std::max(0.0, 1.0 - std::abs(x));
      w.push_back(v);
      total += v;
    }
    for (double& v : w) v = total > 0 ? v / total : 0;
    p.first.push_back(lo);
    p.weights.push_back(std::move(w));
  }
  return p;
}

uint8_t Clip8(double v) { return static_cast<uint8_t>(std::clamp(std::floor(v + 0.5), 0.0, 255.0)); }

Image ResizeWidth(const Image& in, int64_t width) {
  if (width == in.width) return in;
  const Pass p = MakePass(in.width, width);
  Image out{in.height, width, std::vector<uint8_t>(static_cast<size_t>(in.height * width * 3))};
  for (int64_t y = 0; y < in.height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        double v = 0;
        for (size_t k = 0; k < p.weights[x].size(); ++k) v += p.weights[x][k] * in.rgb[(y * in.width + p.first[x] + k) * 3 + c];
        out.rgb[(y * width + x) * 3 + c] = Clip8(v);
      }
    }
  }
  return out;
}

Image ResizeHeight(const Image& in, int64_t height) {
  if (height == in.height) return in;
  const Pass p = MakePass(in.height, height);
  Image out{height, in.width, std::vector<uint8_t>(static_cast<size_t>(height * in.width * 3))};
  for (int64_t y = 0; y < height; ++y) {
    for (int64_t x = 0; x < in.width; ++x) {
      for (int c = 0; c < 3; ++c) {
        double v = 0;
        for (size_t k = 0; k < p.weights[y].size(); ++k) v += p.weights[y][k] * in.rgb[((p.first[y] + k) * in.width + x) * 3 + c];
        out.rgb[(y * in.width + x) * 3 + c] = Clip8(v);
      }
    }
  }
  return out;
}

// The image of a PPM `file`'s bytes, read from `path`.
StatusOr<Image> ParsePpm(const std::string& file, const std::string& path) {
  const std::string* text = &file;
  const std::string fix = "; fix: give an 8-bit binary PPM (P6) or PNG, e.g. `convert image.jpg image.png`";
  size_t pos = 0;
  std::string magic, w, h, maxval;
  if (!NextField(*text, &pos, &magic) || magic != "P6") {
    return Status::InvalidArgument(path + ": neither a PNG nor a binary PPM image (P6), the formats read here" + fix);
  }
  if (!NextField(*text, &pos, &w) || !NextField(*text, &pos, &h) || !NextField(*text, &pos, &maxval)) {
    return Status::InvalidArgument(path + ": the PPM header ends before width, height and maxval" + fix);
  }
  Image image;
  try {
    image.width = std::stoll(w);
    image.height = std::stoll(h);
  } catch (const std::exception&) {
    return Status::InvalidArgument(path + ": PPM width and height must be numbers, got " + w + " and " + h + fix);
  }
  if (maxval != "255" || image.width < 1 || image.height < 1 || image.width > 65536 || image.height > 65536) {
    return Status::InvalidArgument(path + ": PPM of " + w + " x " + h + " with maxval " + maxval +
                                   "; only 1 to 65536 pixels a side with maxval 255" + fix);
  }
  const size_t bytes = static_cast<size_t>(image.width * image.height * 3);
  if (text->size() < pos + 1 + bytes) {
    return Status::InvalidArgument(path + ": the PPM holds fewer than the " + std::to_string(bytes) +
                                   " pixel bytes its header announces" + fix);
  }
  image.rgb.assign(text->begin() + static_cast<std::ptrdiff_t>(pos + 1),
                   text->begin() + static_cast<std::ptrdiff_t>(pos + 1 + bytes));
  return image;
}

}  // namespace

StatusOr<Image> ReadImage(const std::string& path) {
  StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  return IsPng(*bytes) ? DecodePng(*bytes, path) : ParsePpm(*bytes, path);
}

StatusOr<Image> ReadPpm(const std::string& path) {
  StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  return ParsePpm(*bytes, path);
}


std::pair<int64_t, int64_t> BestTileGrid(int64_t height, int64_t width, int64_t tile_size, int64_t max_num_tiles) {
  double best_up = INFINITY, best_down = -INFINITY;
  std::pair<int64_t, int64_t> up{0, 0}, down{0, 0};
  for (int64_t rows = 1; rows <= max_num_tiles; ++rows) {
    for (int64_t cols = 1; rows * cols <= max_num_tiles; ++cols) {
      const double scale = std::min(static_cast<double>(rows * tile_size) / static_cast<double>(height),
                                    static_cast<double>(cols * tile_size) / static_cast<double>(width));
      // Of grids with equal scales, the one of fewest tiles (the first met when their areas are equal).
      auto better = [&](const std::pair<int64_t, int64_t>& g) { return rows * cols < g.first * g.second; };
      if (scale >= 1 && (scale < best_up || (scale == best_up && better(up)))) best_up = scale, up = {rows, cols};
      if (scale < 1 && (scale > best_down || (scale == best_down && better(down)))) best_down = scale, down = {rows, cols};
    }
  }
  return std::isfinite(best_up) ? up : down;
}

std::pair<int64_t, int64_t> SizeOnCanvas(int64_t height, int64_t width, int64_t canvas_height, int64_t canvas_width,
                                         int64_t tile_size) {
  const int64_t target_w = std::clamp(width, tile_size, canvas_width);
  const int64_t target_h = std::clamp(height, tile_size, canvas_height);
  const double scale_h = static_cast<double>(target_h) / static_cast<double>(height);
  const double scale_w = static_cast<double>(target_w) / static_cast<double>(width);
  auto floored = [](double v) { return std::max<int64_t>(1, static_cast<int64_t>(std::floor(v))); };
  if (scale_w < scale_h) return {std::min(floored(static_cast<double>(height) * scale_w), target_h), target_w};
  return {target_h, std::min(floored(static_cast<double>(width) * scale_h), target_w)};
}

Image ResizeBilinear(const Image& image, int64_t height, int64_t width) {
  return ResizeHeight(ResizeWidth(image, width), height);
}

ImageTiles TileImage(const Image& image, const ImageTransformOptions& o) {
  const auto [rows, cols] = BestTileGrid(image.height, image.width, o.tile_size, o.max_num_tiles);
  const int64_t s = o.tile_size;
  const auto [h, w] = SizeOnCanvas(image.height, image.width, rows * s, cols * s, s);
  const Image resized = ResizeBilinear(image, h, w);
  ImageTiles out{rows, cols, s, std::vector<float>(static_cast<size_t>(rows * cols * 3 * s * s))};
  for (int64_t y = 0; y < rows * s; ++y) {
    for (int64_t x = 0; x < cols * s; ++x) {
      const int64_t tile = (y / s) * cols + x / s;
      for (int c = 0; c < 3; ++c) {
        const float v = y < h && x < w ? resized.rgb[(y * w + x) * 3 + c] / 255.0f : 0.0f;
        out.pixels[((tile * 3 + c) * s + y % s) * s + x % s] = (v - o.mean[c]) / o.std[c];
      }
    }
  }
  return out;
}

}  // namespace tmx::data
