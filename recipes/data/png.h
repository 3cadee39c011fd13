// PNG images (the format of most image datasets on the Hub), decoded to 8-bit RGB as Pillow's convert("RGB")
// gives them, which is what torchtune's image loading hands its transform: grey replicated to three channels, a
// palette looked up, alpha dropped. Read: 8 bits per sample in any colour type (grey, RGB, palette, grey with
// alpha, RGBA), not interlaced; the image data inflated with zlib. Torch-free.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "recipes/data/image_transform.h"

namespace tmx::data {

// True when `bytes` start with PNG's 8-byte signature.
bool IsPng(std::string_view bytes);

// The image `bytes` (a whole PNG file) hold. InvalidArgument naming `path`, the problem and the fix for a
// truncated or malformed file, a bit depth other than 8, an interlaced image, or more than 2^28 bytes of pixels.
StatusOr<Image> DecodePng(std::string_view bytes, const std::string& path);

}  // namespace tmx::data
