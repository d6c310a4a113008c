// The kernel templates, compiled into the library by cmake/EmbedTemplates.cmake.
#pragma once
#include <cstddef>

namespace flashjit {

struct EmbeddedTemplate {
  const char* name;  // file name under templates/
  const char* text;
};

extern const EmbeddedTemplate kEmbeddedTemplates[];
extern const size_t kNumEmbeddedTemplates;

}  // namespace flashjit
