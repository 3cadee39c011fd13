// The image side of torchtune's llama3_2_vision_transform (its CLIPImageTransform; transformers'
// MllamaImageProcessor computes the same): an image is resized, keeping its aspect ratio, to fit the best grid of
// tiles (at most max_num_tiles tiles of tile_size pixels), padded with black on the right and bottom to the grid,
// cut into tiles row by row, and normalised per channel with CLIP's mean and standard deviation. Torch-free.
//
// The grid: of every rows x cols with rows * cols <= max_num_tiles, the one that needs the least upscaling, or,
// when every grid needs the image shrunk, the least shrinking; of grids with the same scale, the smallest. The
// image's size on it: each side between tile_size and the grid's, the limiting side's scale for both (floored,
// at least 1 pixel). Resizing is bilinear with a triangle filter widened by the shrink factor (antialiased), each
// pass rounded to 8 bits, as Pillow's BILINEAR (which transformers uses; within 1 of its values per channel).
//
// Images are read from PNG (png.h: 8 bits, not interlaced) and binary PPM (P6, 8 bits) files: the shipped samples
// are PPM; this build links no JPEG decoder (convert such images, e.g. `convert in.jpg out.png`).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tmx::data {

// 8-bit RGB pixels, row-major, 3 bytes a pixel.
struct Image {
  int64_t height = 0, width = 0;
  std::vector<uint8_t> rgb;
};

// InvalidArgument naming the file for anything but a P6 PPM with maxval 255 (and its fix); NotFound/IoError from
// reading.
StatusOr<Image> ReadPpm(const std::string& path);

// A PNG (by its signature) or PPM file's image. Errors: the format's, naming the file, the problem and the fix.
StatusOr<Image> ReadImage(const std::string& path);

struct ImageTransformOptions {
  int64_t tile_size = 560;   // torchtune's image_size
  int64_t max_num_tiles = 4;
  float mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};  // CLIP's, torchtune's and Mllama's
  float std[3] = {0.26862954f, 0.26130258f, 0.27577711f};
};

// rows x cols tiles of the image's grid (see above).
std::pair<int64_t, int64_t> BestTileGrid(int64_t height, int64_t width, int64_t tile_size, int64_t max_num_tiles);

// The image's height and width on a canvas of canvas_height x canvas_width (see above).
std::pair<int64_t, int64_t> SizeOnCanvas(int64_t height, int64_t width, int64_t canvas_height, int64_t canvas_width,
                                         int64_t tile_size);

// Pillow-style antialiased bilinear resize. REQUIRES: positive sizes.
Image ResizeBilinear(const Image& image, int64_t height, int64_t width);

// An image as the model takes it: rows * cols tiles of 3 x tile_size x tile_size floats, tile r * cols + c.
struct ImageTiles {
  int64_t rows = 0, cols = 0, tile_size = 0;
  std::vector<float> pixels;
  int64_t num_tiles() const { return rows * cols; }
};

// REQUIRES: a non-empty image.
ImageTiles TileImage(const Image& image, const ImageTransformOptions& options);

}  // namespace tmx::data
