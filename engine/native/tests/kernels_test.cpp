// kernels_test.cpp: the CASESTUDY_KERNELS switch (src/kernels.h).
#include <iostream>
#include <stdexcept>
#include <string>

#include "kernels.h"
#include "native_test.h"

using namespace cs;

namespace {

bool throws(const std::string& v) {
  try {
    kernels::parse(v);
  } catch (const std::invalid_argument&) {
    return true;
  }
  return false;
}

}  // namespace

int kernels_tests() {
  // lny is off by default (kernels.cpp: off_by_default), on with "all" or by name.
  CS_CHECK(kernels::parse("") == "ce,ln,bn,pool,lin,stem,cast,res,qkv,adam,fp8cast,lnb,rand,adamc");
  CS_CHECK(kernels::parse("default") == kernels::parse(""));
  CS_CHECK(kernels::parse("all") == "ce,ln,bn,pool,lin,stem,cast,res,qkv,adam,fp8cast,lnb,lny,rand,adamc");
  CS_CHECK(kernels::parse("all,-bn") == "ce,ln,pool,lin,stem,cast,res,qkv,adam,fp8cast,lnb,lny,rand,adamc");
  CS_CHECK(kernels::parse("ln,res,lny") == "ln,res,lny");
  CS_CHECK(kernels::parse("+lny") == "ce,ln,bn,pool,lin,stem,cast,res,qkv,adam,fp8cast,lnb,lny,rand,adamc");
  CS_CHECK(kernels::parse("-lnb,+lny") == "ce,ln,bn,pool,lin,stem,cast,res,qkv,adam,fp8cast,lny,rand,adamc");
  CS_CHECK(kernels::parse("native,+pool") == "pool");
  CS_CHECK(throws("+xx"));
  CS_CHECK(throws("ce,+lny"));
  CS_CHECK(kernels::parse("-bn,all") == kernels::parse("all,-bn"));  // the keyword wherever it stands
  CS_CHECK(kernels::parse("+lny,-lny") == kernels::parse(""));        // signed entries in order
  CS_CHECK(throws("all,ln"));      // a base set with a list of kernels to use
  CS_CHECK(throws("default,lny"));
  CS_CHECK(throws("all,native"));  // two base sets
  CS_CHECK(kernels::parse("native") == "");
  CS_CHECK(kernels::parse("none") == "");
  CS_CHECK(kernels::parse("ln") == "ln");
  CS_CHECK(kernels::parse(" bn , ce ") == "ce,bn");
  CS_CHECK(kernels::parse("-bn") == "ce,ln,pool,lin,stem,cast,res,qkv,adam,fp8cast,lnb,rand,adamc");
  CS_CHECK(kernels::parse("-bn,-ce,-pool,-lin,-stem,-cast,-res,-qkv,-adam,-fp8cast,-lnb,-lny,-rand,-adamc") == "ln");
  CS_CHECK(kernels::parse("native,pool") == "pool");
  CS_CHECK(kernels::parse("adam,ce") == "ce,adam");  // the list's order
  CS_CHECK(throws("layernorm"));
  CS_CHECK(throws("-xx"));
  CS_CHECK(throws("ce,-ln"));
  kernels::set_for_tests("ln");
  CS_CHECK(kernels::enabled("ln") == kernels::compiled());
  CS_CHECK(!kernels::enabled("ce"));
  CS_CHECK(kernels::in_use() == (kernels::compiled() ? "ln" : "none"));
  kernels::set_for_tests("native");
  CS_CHECK(!kernels::enabled("ln") && kernels::in_use() == "none");
  // The host versions (tests): enabled without CUDA kernels, still not "in use".
  kernels::set_for_tests("ln");
  kernels::set_host_for_tests(true);
  CS_CHECK(kernels::enabled("ln") && !kernels::enabled("bn"));
  CS_CHECK(kernels::in_use() == (kernels::compiled() ? "ln" : "none"));
  kernels::set_host_for_tests(false);
  CS_CHECK(kernels::enabled("ln") == kernels::compiled());
  kernels::set_for_tests("");
  std::cout << "  kernels switch ok (compiled: " << (kernels::compiled() ? "yes" : "no")
            << ", in use: " << kernels::in_use() << ")\n";
  return 0;
}
