// Models written as text (model.layers): errors name the layer, shapes must
// chain, and the built-in models use TF's names and shapes.
#include <boost/test/unit_test.hpp>

#include "tensor/core/error.hpp"
#include "tensor/nn/layer_spec.hpp"
#include "tensor/nn/model.hpp"

using namespace troupe;

namespace {

std::string error_of(std::vector<std::string> specs) {
  try {
    parse_layers(specs, 1);
  } catch (const troupe_error& e) {
    return e.what();
  }
  return "no error";
}

} // namespace

BOOST_AUTO_TEST_SUITE(layer_specs)

BOOST_AUTO_TEST_CASE(errors_name_the_layer_and_the_problem) {
  struct refused {
    std::vector<std::string> layers;
    std::vector<std::string> named; // in the message
  };
  for (auto& [layers, named] : std::vector<refused>{
         {{"relu", "convolution filters=3"}, {"model.layers[1]", "unknown layer 'convolution'"}},
         {{"conv2d filters=3 kernal=5"}, {"unknown parameter 'kernal'"}},
         {{"dense"}, {"missing parameter 'units'"}},
         {{"conv2d filters=3 kernel=3 padding=full"}, {"padding=full"}},
         {{"dense units=-4"}, {"not a positive integer"}},
         {{"dropout rate=1.5"}, {"rate"}},
         {{"dense units"}, {"not key=value"}}}) {
    auto e = error_of(layers);
    for (auto& part : named)
      BOOST_TEST(e.find(part) != std::string::npos, e);
  }
  BOOST_TEST(parse_layers({"conv2d filters=2 kernel=3", "relu", "max_pool", "flatten",
                           "dense units=10 init=truncated_normal stddev=0.1 bias=0.1"},
                          1)
               .size()
             == 5u);
}

BOOST_AUTO_TEST_CASE(shapes_that_do_not_chain_are_refused_with_the_layer_named) {
  model_options o;
  o.layers = {"flatten", "conv2d name=late filters=2 kernel=3", "dense units=10"};
  try {
    make_model(model_kind::custom, o);
    BOOST_FAIL("expected an error");
  } catch (const troupe_error& e) {
    BOOST_TEST(std::string(e.what()).find("late") != std::string::npos, e.what());
  }
  o.layers = {"flatten", "dense units=7"};
  try {
    make_model(model_kind::custom, o);
    BOOST_FAIL("expected an error");
  } catch (const troupe_error& e) {
    BOOST_TEST(std::string(e.what()).find("10 units") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(built_in_models_use_tf_names_and_shapes) {
  auto cnn = make_model(model_kind::cnn);
  std::vector<std::string> names;
  for (auto& v : cnn->variables())
    names.push_back(v.name);
  BOOST_TEST(
    names
      == (std::vector<std::string>{"conv1/weights", "conv1/biases", "conv2/weights", "conv2/biases",
                                   "fc1/weights", "fc1/biases", "fc2/weights", "fc2/biases"}),
    boost::test_tools::per_element());
  BOOST_TEST(cnn->variables()[4].shape == (shape_t{3136, 1024}), boost::test_tools::per_element());
  BOOST_TEST(cnn->variables()[2].shape == (shape_t{5, 5, 32, 64}),
             boost::test_tools::per_element());
  auto mlp = make_model(model_kind::mlp);
  BOOST_TEST(mlp->variables().size() == 6u);
  BOOST_TEST(mlp->variables()[2].shape == (shape_t{256, 256}), boost::test_tools::per_element());
  for (auto kind : {model_kind::vgg11, model_kind::vgg16, model_kind::vgg19}) {
    auto vgg = make_model(kind);
    BOOST_TEST(vgg->variables().back().shape == (shape_t{10}), boost::test_tools::per_element());
  }
  BOOST_TEST(make_model(model_kind::vgg16)->variables().size() == 2u * 16u);
  BOOST_TEST(make_model(model_kind::vgg19)->variables().size() == 2u * 19u);
}

BOOST_AUTO_TEST_SUITE_END()
