/*  checkpoint.c: training checkpoints as step folders with an atomically swapped `latest` link,
 *  so that a run killed while saving still resumes from the previous whole checkpoint. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/status.h"
#include "model/safetensors.h"
#include "model/shards.h"
#include "train/trainer.h"

static char const *const uform_checkpoint_files_[] = {"model.safetensors", "README.md", "optimizer.safetensors",
                                                      "trainer.json"};

static int uform_compare_names_(void const *a, void const *b) {
    return strcmp(*(char const *const *)a, *(char const *const *)b);
}

/* Removes step folders older than the newest `keep`, deleting only the files a checkpoint holds. */
static void uform_prune_steps_(char const *directory, size_t keep) {
    DIR *folder = opendir(directory);
    if (!folder) return;
    char *names[4096];
    size_t count = 0;
    struct dirent *entry;
    while ((entry = readdir(folder)) && count < 4096)
        if (!strncmp(entry->d_name, "step-", 5) && !strchr(entry->d_name, '.')) names[count++] = strdup(entry->d_name);
    closedir(folder);
    qsort(names, count, sizeof(names[0]), uform_compare_names_);
    for (size_t i = 0; i < count; ++i) {
        if (names[i] && i + keep < count) {
            char path[4096];
            for (size_t f = 0; f < sizeof(uform_checkpoint_files_) / sizeof(uform_checkpoint_files_[0]); ++f) {
                snprintf(path, sizeof(path), "%s/%s/%s", directory, names[i], uform_checkpoint_files_[f]);
                unlink(path);
            }
            snprintf(path, sizeof(path), "%s/%s", directory, names[i]);
            rmdir(path); /* fails, harmlessly, when the folder holds files of someone else's */
        }
        free(names[i]);
    }
}

uform_status_t uform_checkpoint_save(uform_model_t const *model, uform_trainer_t const *trainer, char const *directory,
                                     char const *command, char const *state_json, size_t keep) {
    if (!model || !trainer || !directory) return uform_fail(uform_invalid_argument_k, "uform_checkpoint_save: NULL argument");
    if (trainer->device_ahead)
        return uform_fail(uform_invalid_argument_k, "uform_checkpoint_save: the GPU holds newer weights and moments than "
                                                    "the host: call uform_trainer_sync first");
    char step_name[64], step_path[4096], path[4200];
    snprintf(step_name, sizeof(step_name), "step-%08zu", trainer->steps);
    if (snprintf(step_path, sizeof(step_path), "%s/%s", directory, step_name) >= (int)sizeof(step_path))
        return uform_fail(uform_invalid_argument_k, "%s: path too long", directory);
    UFORM_TRY(uform_model_save(model, step_path, command));
    snprintf(path, sizeof(path), "%s/optimizer.safetensors", step_path);
    UFORM_TRY(uform_trainer_save_state(trainer, path));
    snprintf(path, sizeof(path), "%s/trainer.json", step_path);
    char const *state = state_json ? state_json : "{}";
    UFORM_TRY(uform_write_atomic(path, state, strlen(state)));
    /* The swap: a fresh link under a temporary name renamed over `latest`. */
    char temporary[4200], latest[4200];
    snprintf(temporary, sizeof(temporary), "%s/latest.tmp.%ld", directory, (long)getpid());
    snprintf(latest, sizeof(latest), "%s/latest", directory);
    unlink(temporary);
    if (symlink(step_name, temporary) != 0)
        return uform_fail(uform_io_k, "%s: cannot create a link: %s", temporary, strerror(errno));
    if (rename(temporary, latest) != 0) {
        unlink(temporary);
        return uform_fail(uform_io_k, "%s: cannot point at %s: %s", latest, step_name, strerror(errno));
    }
    int folder = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (folder >= 0) {
        fsync(folder);
        close(folder);
    }
    if (keep) uform_prune_steps_(directory, keep);
    return uform_ok_k;
}

uform_status_t uform_checkpoint_resolve(char const *directory, char *resolved, size_t capacity) {
    if (!directory || !resolved) return uform_fail(uform_invalid_argument_k, "uform_checkpoint_resolve: NULL argument");
    char path[4200];
    struct stat status;
    snprintf(path, sizeof(path), "%s/model.safetensors", directory);
    int checkpoint = stat(path, &status) == 0;
    snprintf(path, sizeof(path), "%s/" UFORM_SHARDS_INDEX, directory);
    if (checkpoint || stat(path, &status) == 0) {
        if (snprintf(resolved, capacity, "%s", directory) >= (int)capacity)
            return uform_fail(uform_invalid_argument_k, "%s: path too long", directory);
        return uform_ok_k;
    }
    char link[256];
    snprintf(path, sizeof(path), "%s/latest", directory);
    ssize_t length = readlink(path, link, sizeof(link) - 1);
    if (length <= 0)
        return uform_fail(uform_io_k, "%s: neither a checkpoint (no model.safetensors or " UFORM_SHARDS_INDEX ") nor a run folder (no latest)", directory);
    link[length] = 0;
    if (snprintf(resolved, capacity, "%s/%s", directory, link) >= (int)capacity)
        return uform_fail(uform_invalid_argument_k, "%s: path too long", directory);
    return uform_ok_k;
}
