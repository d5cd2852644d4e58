#define BOOST_TEST_MODULE tensor
#include <boost/test/unit_test.hpp>
