#pragma once
// MNIST-format data (IDX files, gzipped or not) and batches of it. Which
// examples each worker reads is sampler.hpp's.
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/core/error.hpp"
#include "tensor/core/tensor.hpp"

namespace troupe {

/// Images as rows of floats in [0, 1] and their integer labels.
struct dataset {
  tensor images;               // [examples, height * width]
  std::vector<int32_t> labels; // [examples]
  size_t size() const noexcept { return labels.size(); }
  int64_t features() const { return images.dim(1); }
};

/// A minibatch copied out of a dataset.
struct batch {
  tensor images;
  std::vector<int32_t> labels;
  size_t size() const noexcept { return labels.size(); }
};

/// Reads an IDX image file (magic 2051) and label file (magic 2049). Throws
/// data_error naming the file on a missing, truncated or corrupt file, a wrong
/// magic number, no examples, or image and label counts that differ. Memory
/// follows the data the files hold, never the counts their headers claim.
dataset load_idx(const std::string& images_path, const std::string& labels_path);

/// Checks a loaded set before anyone trains on it: at least one example, a
/// label per image, every label in [0, classes), every feature finite.
/// Throws data_error naming `what`, the example and the problem.
void check_dataset(const dataset& data, int64_t classes, const std::string& what);

/// Loads `<dir>/<split>-images-idx3-ubyte.gz` and its labels; split is
/// "train" or "t10k" (the Fashion-MNIST / MNIST names).
dataset load_mnist_split(const std::string& dir, const std::string& split);

/// The item count in an IDX file's header (reads only the header).
uint32_t idx_item_count(const std::string& path);

/// Checks that a directory holds the four Fashion-MNIST files; the failure
/// names the first missing file.
maybe_failure check_mnist_dir(const std::string& dir);

/// Copies rows [first, first + count) of `data` into `out` (evaluation).
void copy_batch(const dataset& data, size_t first, size_t count, batch& out);

} // namespace troupe
