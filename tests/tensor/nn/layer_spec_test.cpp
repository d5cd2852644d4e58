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
  auto e = error_of({"relu", "convolution filters=3"});
  BOOST_TEST(e.find("model.layers[1]") != std::string::npos, e);
  BOOST_TEST(e.find("unknown layer 'convolution'") != std::string::npos, e);
  e = error_of({"conv2d filters=3 kernal=5"});
  BOOST_TEST(e.find("unknown parameter 'kernal'") != std::string::npos, e);
  e = error_of({"dense"});
  BOOST_TEST(e.find("missing parameter 'units'") != std::string::npos, e);
  e = error_of({"conv2d filters=3 kernel=3 padding=full"});
  BOOST_TEST(e.find("padding=full") != std::string::npos, e);
  e = error_of({"dense units=-4"});
  BOOST_TEST(e.find("not a positive integer") != std::string::npos, e);
  e = error_of({"dropout rate=1.5"});
  BOOST_TEST(e.find("rate") != std::string::npos, e);
  e = error_of({"dense units"});
  BOOST_TEST(e.find("not key=value") != std::string::npos, e);
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
    make_model("custom", o);
    BOOST_FAIL("expected an error");
  } catch (const troupe_error& e) {
    BOOST_TEST(std::string(e.what()).find("late") != std::string::npos, e.what());
  }
  o.layers = {"flatten", "dense units=7"};
  try {
    make_model("custom", o);
    BOOST_FAIL("expected an error");
  } catch (const troupe_error& e) {
    BOOST_TEST(std::string(e.what()).find("10 units") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(built_in_models_use_tf_names_and_shapes) {
  auto cnn = make_model("cnn");
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
  auto mlp = make_model("mlp");
  BOOST_TEST(mlp->variables().size() == 6u);
  BOOST_TEST(mlp->variables()[2].shape == (shape_t{256, 256}), boost::test_tools::per_element());
  for (auto name : {"vgg11", "vgg16", "vgg19"}) {
    auto vgg = make_model(name);
    BOOST_TEST(vgg->variables().back().shape == (shape_t{10}), boost::test_tools::per_element());
  }
  BOOST_TEST(make_model("vgg16")->variables().size() == 2u * 16u);
  BOOST_TEST(make_model("vgg19")->variables().size() == 2u * 19u);
}

BOOST_AUTO_TEST_SUITE_END()
