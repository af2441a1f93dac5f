#include "app.hpp"

int main(int argc, char** argv) { return dtrain::cli::run(argc, argv); }
