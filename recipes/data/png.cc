#include "recipes/data/png.h"

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace tmx::data {
namespace {

constexpr std::string_view kSignature("\x89PNG\r\n\x1a\n", 8);
constexpr const char* kFix = "; fix: give an 8-bit, non-interlaced PNG or a binary PPM (P6), e.g. "
                             "`convert in.png -depth 8 -interlace none out.png`";

uint32_t Be32(std::string_view b, size_t at) {
  auto u = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(b[at + i])); };
  return u(0) << 24 | u(1) << 16 | u(2) << 8 | u(3);
}

// What the chunks hold: the header's fields, the palette and the concatenated image data.
struct Chunks {
  uint32_t width = 0, height = 0;
  int depth = 0, color = -1, interlace = 0;
  std::string palette, data;
};

StatusOr<Chunks> ReadChunks(std::string_view bytes, const std::string& path) {
  Chunks c;
  bool header = false, end = false;
  for (size_t pos = kSignature.size(); !end;) {
    if (pos + 12 > bytes.size()) return Status::InvalidArgument(path + ": the PNG ends before its IEND chunk" + kFix);
    const uint32_t length = Be32(bytes, pos);
    const std::string_view type = bytes.substr(pos + 4, 4);
    if (length > bytes.size() - pos - 12) {
      return Status::InvalidArgument(path + ": PNG chunk " + std::string(type) + " runs past the file's end" + kFix);
    }
    const std::string_view body = bytes.substr(pos + 8, length);
    if (!header && type != "IHDR") return Status::InvalidArgument(path + ": the PNG does not start with IHDR" + kFix);
    if (type == "IHDR" && length >= 13) {
      c.width = Be32(body, 0);
      c.height = Be32(body, 4);
      c.depth = static_cast<unsigned char>(body[8]);
      c.color = static_cast<unsigned char>(body[9]);
      c.interlace = static_cast<unsigned char>(body[12]);
      header = true;
    } else if (type == "PLTE") {
      c.palette = std::string(body);
    } else if (type == "IDAT") {
      c.data.append(body);
    } else if (type == "IEND") {
      end = true;
    }
    pos += 12 + length;
  }
  return c;
}

int Channels(int color) { return color == 0 ? 1 : color == 2 ? 3 : color == 3 ? 1 : color == 4 ? 2 : color == 6 ? 4 : 0; }

StatusOr<std::vector<unsigned char>> Inflate(const std::string& data, size_t expected, const std::string& path) {
  std::vector<unsigned char> out(expected);
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return Status::Internal(path + ": zlib could not start inflating");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  const int result = inflate(&z, Z_FINISH);
  const size_t produced = out.size() - z.avail_out;
  inflateEnd(&z);
  if (result != Z_STREAM_END || produced != expected) {
    return Status::InvalidArgument(path + ": the PNG's image data " +
                                   (result == Z_DATA_ERROR ? std::string("is not valid zlib data")
                                                           : "does not inflate to the " + std::to_string(expected) +
                                                                 " bytes its header announces") +
                                   kFix);
  }
  return out;
}

// Undoes each row's filter (None, Sub, Up, Average, Paeth) in place; `bpp` bytes a pixel. Rows keep their
// leading filter byte.
Status Unfilter(std::vector<unsigned char>* raw, size_t stride, size_t rows, size_t bpp, const std::string& path) {
  for (size_t r = 0; r < rows; ++r) {
    unsigned char* row = raw->data() + r * (stride + 1);
    const unsigned char* above = r > 0 ? row - (stride + 1) : nullptr;
    const int filter = row[0];
    if (filter > 4) {
      return Status::InvalidArgument(path + ": PNG row " + std::to_string(r) + " has filter type " +
                                     std::to_string(filter) + " (0 to 4 exist)" + kFix);
    }
    for (size_t i = 1; i <= stride; ++i) {
      const int a = i > bpp ? row[i - bpp] : 0, b = above ? above[i] : 0, c = above && i > bpp ? above[i - bpp] : 0;
      int predicted = 0;
      if (filter == 1) predicted = a;
      if (filter == 2) predicted = b;
      if (filter == 3) predicted = (a + b) / 2;
      if (filter == 4) {
        const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
        predicted = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      row[i] = static_cast<unsigned char>(row[i] + predicted);
    }
  }
  return Status::OK();
}

}  // namespace

bool IsPng(std::string_view bytes) { return bytes.substr(0, kSignature.size()) == kSignature; }

StatusOr<Image> DecodePng(std::string_view bytes, const std::string& path) {
  if (!IsPng(bytes)) return Status::InvalidArgument(path + ": not a PNG (its signature is missing)" + kFix);
  StatusOr<Chunks> c = ReadChunks(bytes, path);
  TM_RETURN_IF_ERROR(c.status());
  const int channels = Channels(c->color);
  if (channels == 0 || c->depth != 8 || c->interlace != 0) {
    return Status::InvalidArgument(path + ": PNG of colour type " + std::to_string(c->color) + ", " +
                                   std::to_string(c->depth) + " bits per sample" +
                                   (c->interlace != 0 ? ", interlaced" : "") + "; read here: 8 bits, not interlaced" +
                                   kFix);
  }
  if (c->width < 1 || c->height < 1 || c->width > 65536 || c->height > 65536 ||
      uint64_t{c->width} * c->height * static_cast<uint64_t>(channels) > (uint64_t{1} << 28)) {
    return Status::InvalidArgument(path + ": PNG of " + std::to_string(c->width) + " x " + std::to_string(c->height) +
                                   " pixels; read here: 1 to 65536 a side and at most 2^28 bytes" + kFix);
  }
  const size_t stride = size_t{c->width} * static_cast<size_t>(channels), rows = c->height;
  StatusOr<std::vector<unsigned char>> raw = Inflate(c->data, rows * (stride + 1), path);
  TM_RETURN_IF_ERROR(raw.status());
  TM_RETURN_IF_ERROR(Unfilter(&*raw, stride, rows, static_cast<size_t>(channels), path));
  Image image;
  image.height = c->height;
  image.width = c->width;
  image.rgb.resize(rows * c->width * 3);
  for (size_t r = 0; r < rows; ++r) {
    const unsigned char* row = raw->data() + r * (stride + 1) + 1;
    for (size_t x = 0; x < c->width; ++x) {
      const unsigned char* p = row + x * static_cast<size_t>(channels);
      uint8_t* out = image.rgb.data() + (r * c->width + x) * 3;
      if (c->color == 3) {
        if (size_t{p[0]} * 3 + 3 > c->palette.size()) {
          return Status::InvalidArgument(path + ": PNG pixel index " + std::to_string(p[0]) +
                                         " is outside its palette of " + std::to_string(c->palette.size() / 3) +
                                         " colours" + kFix);
        }
        for (int k = 0; k < 3; ++k) out[k] = static_cast<uint8_t>(c->palette[size_t{p[0]} * 3 + k]);
      } else {
        const bool grey = channels <= 2;  // grey, or grey with alpha: replicated
        for (int k = 0; k < 3; ++k) out[k] = p[grey ? 0 : k];
      }
    }
  }
  return image;
}

}  // namespace tmx::data
