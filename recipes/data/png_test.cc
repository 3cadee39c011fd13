// The fixtures (recipes/data/testdata/png/, scripts/make_png_fixtures.py) are Pillow's PNGs of each colour type,
// its adaptive filters choosing among all five per row, beside the PPM of Pillow's convert("RGB") of each.
#include "recipes/data/png.h"

#include <gtest/gtest.h>

#include "base/file_util.h"

namespace tmx::data {
namespace {

const std::string kDir = std::string(TM_SOURCE_DIR) + "/recipes/data/testdata/png/";

TEST(PngTest, EachColourTypeDecodesToPillowsRgb) {
  for (const char* name : {"rgb", "rgba", "grey", "grey_alpha", "palette"}) {
    SCOPED_TRACE(name);
    StatusOr<Image> png = ReadImage(kDir + name + ".png");
    ASSERT_TRUE(png.ok()) << png.status().ToString();
    StatusOr<Image> ppm = ReadImage(kDir + name + ".ppm");
    ASSERT_TRUE(ppm.ok()) << ppm.status().ToString();
    EXPECT_EQ(png->height, ppm->height);
    EXPECT_EQ(png->width, ppm->width);
    EXPECT_EQ(png->rgb, ppm->rgb);
  }
}

TEST(PngTest, ABrokenFileIsNamedWithTheFix) {
  StatusOr<std::string> bytes = ReadFile(kDir + "rgb.png");
  ASSERT_TRUE(bytes.ok());
  StatusOr<Image> cut = DecodePng(bytes->substr(0, bytes->size() / 2), "half.png");
  ASSERT_EQ(cut.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(cut.status().message().find("half.png: PNG chunk IDAT runs past the file's end; fix: give an 8-bit"),
            std::string::npos)
      << cut.status().message();
  std::string sixteen = *bytes;
  sixteen[8 + 8 + 8] = 16;  // IHDR's bit depth
  StatusOr<Image> deep = DecodePng(sixteen, "deep.png");
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("deep.png: PNG of colour type 2, 16 bits per sample; read here: 8 bits"),
            std::string::npos)
      << deep.status().message();
  std::string garbled = *bytes;
  garbled[8 + 25 + 8 + 4] ^= 0x55;  // inside the first IDAT's zlib stream
  EXPECT_FALSE(DecodePng(garbled, "garbled.png").ok());
  StatusOr<Image> text = ReadImage(kDir + "../../samples/datasets/cauldron_sample.json");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("neither a PNG nor a binary PPM image (P6)"), std::string::npos)
      << text.status().message();
}

}  // namespace
}  // namespace tmx::data
