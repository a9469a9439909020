// The C++ API: RAII scopes, TICKSCOPE_FUNCTION() named from __PRETTY_FUNCTION__, groups, a
// scope left by an exception. Built with g++ -Wall -Wextra -Werror.
#include <cstdio>
#include <stdexcept>
#include "tickscope.h"

static volatile unsigned long sink;

static void spin(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) sink += i;
}

namespace shapes {
template <typename T>
class Grid {
  public:
    T sum(int n) const {
        TICKSCOPE_FUNCTION();
        spin(200);
        return T(n);
    }
};
}  // namespace shapes

static void store_put() {
    TICKSCOPE_API(store);
    spin(50);
}

static void store_get() {
    TICKSCOPE_API(store);
    spin(50);
    store_put();
}

static void may_throw(int i) {
    TICKSCOPE_SCOPE("may_throw");
    spin(100);
    if (i % 2) throw std::runtime_error("odd");
}

int main() {
    shapes::Grid<double> g;
    double total = 0;
    for (int i = 0; i < 40; i++) total += g.sum(i);
    for (int i = 0; i < 30; i++) store_get();
    int caught = 0;
    for (int i = 0; i < 10; i++) {
        try {
            may_throw(i);
        } catch (const std::exception &) {
            caught++;
        }
    }
    {
        TICKSCOPE_SCOPE("after");
        spin(10);
    }
    tickscope_timer t;
    tickscope_timer_create(&t);
    std::printf("total %.0f caught %d elapsed %s\n", total, caught,
                tickscope_timer_elapsed(&t) >= 0.0 ? "ok" : "bad");
    return 0;
}
