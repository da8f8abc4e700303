/* examples/residual/residual.c — a small residual CNN built from torc's
 * modules: lazy sizes, a skip connection, the summary table, a few steps
 * of SGD with momentum on random data (cross-entropy from the losses
 * plugin, the optimizer from the optim plugin), and a checkpoint of the
 * model and the optimizer saved and loaded back.
 *
 *   cc residual.c $(pkg-config --cflags --libs torc) -o residual
 *   TORC_PLUGIN_PATH=... ./residual [CHECKPOINT]
 */
#include <stdio.h>
#include <stdlib.h>

#include <torc/torc.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    if ((call) != TORC_OK) {                                                   \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, torc_last_error());   \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

/* conv -> bn -> relu -> conv -> bn -> add(skip) -> relu -> pool -> linear */
static torc_module *build(void) {
  torc_module *net = torc_sequential_new();
  torc_conv2d_params same = {.padding = {1, 1}};
  CHECK(torc_sequential_append(net, torc_conv2d_new(0, 8, 3, 3, &same, 0)));
  CHECK(torc_sequential_append(net, torc_batchnorm2d_new(0, 1e-5, 0.1)));
  CHECK(torc_sequential_append(net, torc_module_build("relu", NULL)));
  CHECK(torc_sequential_append(net, torc_conv2d_new(0, 8, 3, 3, &same, 0)));
  CHECK(torc_sequential_append(net, torc_batchnorm2d_new(0, 1e-5, 0.1)));
  CHECK(torc_sequential_append(net, torc_add_node_new(-3))); /* + relu out */
  CHECK(torc_sequential_append(net, torc_module_build("relu", NULL)));
  CHECK(torc_sequential_append(net, torc_adaptive_avgpool2d_new(2, 2)));
  CHECK(torc_sequential_append(net, torc_flatten_new(1, -1)));
  CHECK(torc_sequential_append(net, torc_linear_new(0, 10, 1))); /* 8*2*2 */
  return net;
}

int main(int argc, char **argv) {
  const char *ckpt = argc > 1 ? argv[1] : "residual.ckpt.safetensors";
  CHECK(torc_plugin_load("ref", NULL));
  CHECK(torc_plugin_load("losses", NULL));
  CHECK(torc_plugin_load("optim", NULL));
  torc_manual_seed(0);
  torc_module *net = build();
  int scope = torc_scope_begin();
  torc_tensor *x = torc_randn(TORC_SHAPE(16, 1, 12, 12), TORC_F32, TORC_CPU,
                              NULL);
  torc_tensor *y = torc_randint(0, 10, TORC_SHAPE(16), TORC_I64, TORC_CPU,
                                 NULL);

  char *summary = torc_module_summary(net, x); /* infers every lazy size */
  if (summary == NULL)
    CHECK(torc_last_status());
  fputs(summary, stdout);
  free(summary);

  torc_loss *ce = torc_loss_build("cross_entropy", NULL);
  torc_optimizer *opt = torc_optimizer_build("sgd", "lr=0.05, momentum=0.9",
                                             net);
  if (ce == NULL || opt == NULL)
    CHECK(torc_last_status());
  double first = 0, last = 0;
  for (int step = 0; step < 20; step++) {
    int s = torc_scope_begin();
    torc_tensor *loss = torc_loss_forward(ce, torc_module_forward(net, x), y);
    double v;
    CHECK(torc_item(loss, &v));
    CHECK(torc_optimizer_zero_grad(opt, 1));
    CHECK(torc_backward(loss, NULL, 0));
    CHECK(torc_optimizer_step(opt));
    torc_scope_end(s);
    if (step == 0)
      first = v;
    last = v;
  }
  printf("loss: %.4f -> %.4f after 20 steps of SGD (momentum 0.9)\n", first,
         last);

  /* Checkpoint: the model, the optimizer, the step and the RNG, in one
   * atomic file. */
  torc_state_dict *ck = torc_checkpoint_new();
  CHECK(torc_checkpoint_add_module(ck, net));
  CHECK(torc_optimizer_state_dict(opt, "optimizer.", ck));
  CHECK(torc_state_dict_set_i64(ck, "step", 20));
  CHECK(torc_checkpoint_add_rng(ck, "default", NULL));
  CHECK(torc_state_dict_save(ck, ckpt));
  torc_state_dict_free(ck);

  /* A fresh model (lazy sizes inferred by one forward), loaded strictly. */
  torc_module *again = build();
  free(torc_module_summary(again, x));
  torc_optimizer *opt2 = torc_optimizer_build("sgd", "lr=0.05, momentum=0.9",
                                              again);
  torc_state_dict *back = torc_checkpoint_load(ckpt, TORC_CPU);
  if (back == NULL || opt2 == NULL)
    CHECK(torc_last_status());
  CHECK(torc_checkpoint_load_module(back, again, NULL, NULL));
  CHECK(torc_optimizer_load_state_dict(opt2, back, "optimizer."));
  int64_t step;
  CHECK(torc_state_dict_get_i64(back, "step", &step));
  torc_state_dict_free(back);

  /* One more step on each: the restored momentum must give the same
   * update, bit for bit. */
  torc_module *nets[2] = {net, again};
  torc_optimizer *opts[2] = {opt, opt2};
  for (int i = 0; i < 2; i++) {
    int s = torc_scope_begin();
    CHECK(torc_optimizer_zero_grad(opts[i], 1));
    CHECK(torc_backward(
        torc_loss_forward(ce, torc_module_forward(nets[i], x), y), NULL, 0));
    CHECK(torc_optimizer_step(opts[i]));
    torc_scope_end(s);
  }
  torc_module_train(net, 0);
  torc_module_train(again, 0);
  double diff;
  CHECK(torc_item(torc_amax(torc_abs(torc_sub(torc_module_forward(net, x),
                                              torc_module_forward(again, x))),
                            NULL, 0, 0),
                  &diff));
  printf("checkpoint %s (step %lld): reloaded model, one step later, "
         "differs by %g\n", ckpt,
         (long long)step, diff);
  torc_scope_end(scope);
  torc_optimizer_free(opt);
  torc_optimizer_free(opt2);
  torc_loss_free(ce);
  torc_module_free(net);
  torc_module_free(again);
  torc_shutdown();
  return diff == 0 && last < first ? 0 : 1;
}
