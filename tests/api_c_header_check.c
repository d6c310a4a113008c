/* flashjit.h compiles as strict C99 (-std=c99 -pedantic -Wall -Wextra -Werror: see CMakeLists.txt)
 * and its inline helpers behave as documented. Called from the fake-driver suite. */
#include "flashjit/flashjit.h"

int flashjit_c_header_check(void);

int flashjit_c_header_check(void) {
  flashjit_attention_args_t args;
  flashjit_context_options_t options;
  flashjit_tensor_strides_t strides;
  flashjit_attention_args_init(&args);
  flashjit_context_options_init(&options);
  strides = flashjit_contiguous_bshd(10, 4, 64);
  if (args.struct_size != sizeof(args) || args.window_left != -1 || args.window_right != -1 || args.q != 0) return 1;
  if (options.struct_size != sizeof(options) || options.device != 0 || options.cache_dir != NULL) return 2;
  if (strides.batch != 10 * 4 * 64 || strides.row != 4 * 64 || strides.head != 64) return 3;
  if (flashjit_get_version() != FLASHJIT_VERSION || flashjit_check_abi(FLASHJIT_ABI_VERSION) != FLASHJIT_SUCCESS) return 4;
  if (sizeof(flashjit_status_t) != 4 || sizeof(flashjit_compile_policy_t) != 4) return 5;
  return 0;
}
