/* core/st_temps.c — torc_safetensors_remove_stale_temps (torc/safetensors.h):
 * the sweep of a folder for the temporary files of killed saves, which
 * safetensors.c runs before each save, for programs that save into a
 * folder of their own (the trainer's checkpoints and curves.svg).
 */
#include "internal.h"
#include "torc/safetensors.h"

void torc__safetensors_remove_stale_temps(
    const char *dir, int (*want)(const char *name, void *user), void *user);

void torc_safetensors_remove_stale_temps(
    const char *dir, int (*want)(const char *name, void *user), void *user) {
  if (want == NULL)
    return;
  torc__safetensors_remove_stale_temps(dir, want, user);
}
