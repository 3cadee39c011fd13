#include "recipes/data/image_transform.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>

#include "base/file_util.h"
#include "tests/scratch_dir.h"

namespace tmx::data {
namespace {

// Made by scripts/make_mllama_parity_fixtures.py --images: transformers 4.57.6's MllamaImageProcessor (28-pixel
// tiles, up to 4) on five PPM images; <name>.f32 holds its pixel values of the image's tiles.
const std::string kDir = std::string(TM_SOURCE_DIR) + "/recipes/data/testdata/mllama_image/";

std::vector<float> Floats(const std::string& path) {
  StatusOr<std::string> bytes = ReadFile(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  std::vector<float> out(bytes->size() / sizeof(float));
  std::memcpy(out.data(), bytes->data(), out.size() * sizeof(float));
  return out;
}

TEST(ImageTransformTest, TilesAndValuesMatchTransformersMllamaImageProcessor) {
  nlohmann::json expected = nlohmann::json::parse(*ReadFile(kDir + "expected.json"));
  ImageTransformOptions options;
  options.tile_size = expected["tile_size"];
  options.max_num_tiles = expected["max_num_tiles"];
  for (const auto& c : expected["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    StatusOr<Image> image = ReadPpm(kDir + name + ".ppm");
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    ASSERT_EQ(image->height, c["height"].get<int64_t>());
    ImageTiles tiles = TileImage(*image, options);
    EXPECT_EQ(tiles.rows, c["rows"].get<int64_t>());
    EXPECT_EQ(tiles.cols, c["cols"].get<int64_t>());
    const std::vector<float> want = Floats(kDir + name + ".f32");
    ASSERT_EQ(tiles.pixels.size(), want.size());
    double max_diff = 0, sum = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      max_diff = std::max<double>(max_diff, std::abs(tiles.pixels[i] - want[i]));
      sum += std::abs(tiles.pixels[i] - want[i]);
    }
    std::cout << name << ": " << tiles.rows << " x " << tiles.cols << " tiles, max |diff| " << max_diff << ", mean "
              << sum / static_cast<double>(want.size()) << "\n";
    // One 8-bit step is 1 / (255 x 0.26) = 0.015 after normalisation: the resize is within a step of Pillow's.
    EXPECT_LT(max_diff, name == "image0_28x56" ? 1e-5 : 0.016);
  }
}

TEST(ImageTransformTest, TheGridNeedsTheLeastScalingThenTheFewestTiles) {
  EXPECT_EQ(BestTileGrid(560, 560, 560, 4), std::make_pair(int64_t{1}, int64_t{1}));
  EXPECT_EQ(BestTileGrid(100, 200, 560, 4), std::make_pair(int64_t{1}, int64_t{1}));  // upscaled into one tile
  EXPECT_EQ(BestTileGrid(600, 1200, 560, 4), std::make_pair(int64_t{1}, int64_t{2}));
  EXPECT_EQ(BestTileGrid(4000, 100, 560, 4), std::make_pair(int64_t{4}, int64_t{1}));
  EXPECT_EQ(SizeOnCanvas(600, 1200, 560, 1120, 560), std::make_pair(int64_t{560}, int64_t{1120}));
  EXPECT_EQ(SizeOnCanvas(20, 13, 28, 28, 28), std::make_pair(int64_t{28}, int64_t{18}));
}

TEST(ImageTransformTest, OtherImageFilesAreRefusedNamingTheFix) {
  test::ScratchDir dir("image_transform_test");
  std::ofstream(dir.path() + "/a.jpg") << "\xff\xd8\xff\xe0";
  StatusOr<Image> image = ReadImage(dir.path() + "/a.jpg");
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.status().message().find("a.jpg: neither a PNG nor a binary PPM image (P6)"), std::string::npos);
  EXPECT_NE(image.status().message().find("fix: give an 8-bit binary PPM (P6) or PNG"), std::string::npos);
  // A PNG's signature alone: read as a PNG (png_test.cc), which ends too early.
  std::ofstream(dir.path() + "/a.png") << "\x89PNG\r\n\x1a\n";
  image = ReadImage(dir.path() + "/a.png");
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.status().message().find("a.png: the PNG ends before its IEND chunk"), std::string::npos)
      << image.status().message();
  std::ofstream(dir.path() + "/short.ppm") << "P6\n4 4\n255\nabc";
  image = ReadPpm(dir.path() + "/short.ppm");
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.status().message().find("fewer than the 48 pixel bytes"), std::string::npos);
}

}  // namespace
}  // namespace tmx::data
