// The fields every chapter's step table starts with.
#pragma once

namespace stepwise {

//! @brief Which snippet a step is, and how the pages name it: the first fields of each chapter's `Step`
//!        (`struct Step : StepSource { ... }`, initialized as one list: `{"01_naive", "title", "snippets/...", ...}`).
struct StepSource {
    const char* id;          //!< "NN_slug", the file name without extension
    const char* title;       //!< shown on the page
    const char* file;        //!< path from the repository root
    const char* name_space;  //!< the snippet's namespace
};

}  // namespace stepwise
