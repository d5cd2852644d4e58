// The plan library (partitioners, placement, training plans): one executable.
#define BOOST_TEST_MODULE plan
#include <boost/test/unit_test.hpp>
