# What the build must know of this chapter before the registry exists (included by the top level's CMakeLists.txt).
# Its steps launch kernels from kernels: its snippets, and the sources that include them, are built as relocatable
# device code, linked with the device runtime.
set(stepwise_chapter_rdc ON)
