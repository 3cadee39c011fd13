// torchtune.datasets.multimodal's records as messages with images: the_cauldron_dataset (images and texts
// [{user, assistant}], the images before the first user text), llava_instruct_dataset (an image and a ShareGPT
// conversation whose "<image>" tag marks the message the image belongs to) and vqa_dataset (image, input, output).
// Torch-free.
//
// A message's images lead its content (Message::images; the Llama 3 format writes one <|image|> token each after
// the header). torchtune puts a LLaVA image where its tag stands; here the image leads the tagged message and the
// tag is removed (the records' tags lead their messages). Image paths are read relative to image_dir (itself
// relative to the record's file when relative) or, without one, to the record's file; images are PNG or PPM
// (image_transform.h).
#pragma once

#include <vector>

#include "base/status.h"
#include "recipes/data/datasets.h"
#include "recipes/data/image_transform.h"
#include "recipes/data/message_transforms.h"
#include "recipes/data/records.h"

namespace tmx::data {

// The Cauldron's record as messages: each {user, assistant} pair a masked user message and a trained assistant
// one, after new_system_prompt when set. InvalidArgument naming the record and the column for a bad record.
StatusOr<std::vector<Message>> CauldronMessages(const Record& record, const DatasetOptions& options);

// Reads `record`'s images (its component's image column, through column_map), marks the messages they belong to
// and returns their tiles, transformed with `transform`. InvalidArgument/NotFound naming the record and the file.
StatusOr<std::vector<ImageTiles>> AttachImages(const DatasetComponent& component, const DatasetOptions& options,
                                               const ImageTransformOptions& transform, const Record& record,
                                               std::vector<Message>* messages);

}  // namespace tmx::data
