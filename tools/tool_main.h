// The command-line tools' main(): runs the tool and turns an error into its message on stderr
// and an exit status: 2 for the user's mistake (UserError), 1 for anything else.
#pragma once

#include <exception>
#include <iostream>

#include "support/error.h"

namespace attnjit::tools {

template <class Run>
int tool_main(int argc, char** argv, Run&& run) {
    try {
        return run(argc, argv);
    } catch (const UserError& e) {
        std::cerr << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << e.what() << "\n";
        return 1;
    }
}

}  // namespace attnjit::tools
