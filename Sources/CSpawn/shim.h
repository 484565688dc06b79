#ifndef SIBLINGS_CSPAWN_SHIM_H
#define SIBLINGS_CSPAWN_SHIM_H

// posix_spawn(3)'s GNU extensions, which Swift's Glibc module leaves out (glibc declares them only under
// _GNU_SOURCE): closing every descriptor from a number up in the child (glibc 2.34), and the child's working
// directory (glibc 2.29). The declarations are glibc's own.

#include <spawn.h>

extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
extern int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *__restrict actions,
                                                const char *__restrict path);

#endif
