// The checkpoint library (format, directory, restore assembly): one executable.
#define BOOST_TEST_MODULE checkpoint
#include <boost/test/unit_test.hpp>
