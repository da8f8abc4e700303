/* examples/residual/residual.c — a small residual CNN built from torc's
 * modules: lazy sizes, a skip connection, the summary table, a few plain
 * SGD steps on random data, and a checkpoint saved and loaded back.
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

/* One step of plain SGD: p -= lr * grad, outside autograd. */
static void sgd_step(torc_module *m, double lr) {
  torc_named_tensor *p;
  int n = torc_module_named_parameters(m, &p);
  torc_grad_mode mode = torc_set_grad_mode(TORC_NO_GRAD);
  for (int i = 0; i < n; i++) {
    torc_tensor *g = torc_grad_of(p[i].tensor);
    if (g)
      CHECK(torc_sub_(p[i].tensor, torc_mul_scalar(g, lr)));
    CHECK(torc_zero_grad(p[i].tensor, 1));
  }
  torc_set_grad_mode(mode);
  torc_named_tensors_free(p, n);
}

int main(int argc, char **argv) {
  const char *ckpt = argc > 1 ? argv[1] : "residual.ckpt.safetensors";
  CHECK(torc_plugin_load("ref", NULL));
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

  double first = 0, last = 0;
  for (int step = 0; step < 20; step++) {
    int s = torc_scope_begin();
    torc_tensor *logits = torc_module_forward(net, x);
    /* cross entropy by hand: mean(-log_softmax(logits)[i, y_i]) */
    torc_tensor *nll = torc_neg(torc_gather(torc_log_softmax(logits, 1), 1,
                                            torc_unsqueeze(y, 1)));
    torc_tensor *loss = torc_mean(nll, NULL, 0, 0);
    double v;
    CHECK(torc_item(loss, &v));
    CHECK(torc_backward(loss, NULL, 0));
    sgd_step(net, 0.1);
    torc_scope_end(s);
    if (step == 0)
      first = v;
    last = v;
  }
  printf("loss: %.4f -> %.4f after 20 steps\n", first, last);

  /* Checkpoint: the model, the step and the RNG, in one atomic file. */
  torc_state_dict *ck = torc_checkpoint_new();
  CHECK(torc_checkpoint_add_module(ck, net));
  CHECK(torc_state_dict_set_i64(ck, "step", 20));
  CHECK(torc_checkpoint_add_rng(ck, "default", NULL));
  CHECK(torc_state_dict_save(ck, ckpt));
  torc_state_dict_free(ck);

  /* A fresh model (lazy sizes inferred by one forward), loaded strictly. */
  torc_module *again = build();
  free(torc_module_summary(again, x));
  torc_state_dict *back = torc_checkpoint_load(ckpt, TORC_CPU);
  if (back == NULL)
    CHECK(torc_last_status());
  CHECK(torc_checkpoint_load_module(back, again, NULL, NULL));
  int64_t step;
  CHECK(torc_state_dict_get_i64(back, "step", &step));
  torc_state_dict_free(back);

  torc_module_train(net, 0);
  torc_module_train(again, 0);
  double diff;
  CHECK(torc_item(torc_amax(torc_abs(torc_sub(torc_module_forward(net, x),
                                              torc_module_forward(again, x))),
                            NULL, 0, 0),
                  &diff));
  printf("checkpoint %s (step %lld): reloaded model differs by %g\n", ckpt,
         (long long)step, diff);
  torc_scope_end(scope);
  torc_module_free(net);
  torc_module_free(again);
  torc_shutdown();
  return diff == 0 && last < first ? 0 : 1;
}
