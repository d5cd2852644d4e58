// The actors and the plain classes behind them: one Boost.Test executable.
#define BOOST_TEST_MODULE actors
#include <boost/test/unit_test.hpp>
