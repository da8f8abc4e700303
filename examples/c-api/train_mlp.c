/* examples/c-api/train_mlp.c — examples/fashion-mnist/mlp.ini written as a
 * C program against the public headers: the training loop a PyTorch user
 * writes (forward, loss, zero_grad, backward, step; the test set through
 * torc_module_predict: eval mode, no autograd, a planned forward), on
 * Fashion-MNIST.
 *
 *   cc train_mlp.c $(pkg-config --cflags --libs torc) -o train_mlp
 *   ./train_mlp [EPOCHS [TRAIN_SAMPLES [MIN_ACCURACY [TEST_SAMPLES]]]]
 *
 * `make check` runs it on 6000 training samples for one epoch and checks
 * that it learns (test accuracy of at least MIN_ACCURACY, 0.70); with no
 * arguments it trains 15 epochs on all 60000, as mlp.ini does.
 */
#include <stdio.h>
#include <stdlib.h>

#include <torc/torc.h>

#define DATA "/usr/share/datasets/fashion-mnist/"
#define NORMALISE "scale(0.00392156862745098), normalize(0.2860, 0.3530)"

#define CHECK(call)                                                            \
  do {                                                                         \
    if ((call) != TORC_OK) {                                                   \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, torc_last_error());   \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)
#define NEED(ptr)                                                              \
  do {                                                                         \
    if ((ptr) == NULL) {                                                       \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, torc_last_error());   \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static torc_dataset *fashion_mnist(const char *split) {
  char images[256], labels[256];
  snprintf(images, sizeof images, DATA "%s-images-idx3-ubyte.gz", split);
  snprintf(labels, sizeof labels, DATA "%s-labels-idx1-ubyte.gz", split);
  const char *keys[] = {"images", "labels"};
  const char *values[] = {images, labels};
  return torc_dataset_open("idx", keys, values, 2);
}

int main(int argc, char **argv) {
  int epochs = argc > 1 ? atoi(argv[1]) : 15;
  int64_t limit = argc > 2 ? atoll(argv[2]) : 0; /* 0 = every sample */
  double min_accuracy = argc > 3 ? atof(argv[3]) : 0.70;
  int64_t test_limit = argc > 4 ? atoll(argv[4]) : 0; /* 0 = all 10000 */
  CHECK(torc_set_num_threads(2));
  CHECK(torc_plugin_load("ref", NULL));
  if (torc_plugin_load("cpu", NULL) != TORC_OK) /* optional: faster */
    torc_clear_error();
  CHECK(torc_plugin_load("data", NULL));
  CHECK(torc_plugin_load("losses", NULL));
  CHECK(torc_plugin_load("optim", NULL));
  torc_manual_seed(0);

  torc_dataset *train = fashion_mnist("train"), *test = fashion_mnist("t10k");
  if (train == NULL || test == NULL) {
    fprintf(stderr, "train_mlp: %s (apt-get install dataset-fashion-mnist)\n",
            torc_last_error());
    return 77; /* what make check reads as a skip */
  }
  torc_transform *normalise = torc_transform_parse(NORMALISE);
  NEED(normalise);
  torc_loader_opts lo = {.batch_size = 64, .shuffle = 1, .seed = 0,
                         .transform = normalise};
  torc_loader *train_ld = torc_loader_new(train, &lo);
  torc_loader_opts eo = {.batch_size = 1000, .transform = normalise};
  torc_loader *test_ld = torc_loader_new(test, &eo);
  NEED(train_ld);
  NEED(test_ld);

  /* model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
   *                       nn.Linear(256, 128), nn.ReLU(),
   *                       nn.Linear(128, 10)) */
  torc_module *model = torc_sequential_new();
  CHECK(torc_sequential_append(model, torc_flatten_new(1, -1)));
  CHECK(torc_sequential_append(model, torc_linear_new(784, 256, 1)));
  CHECK(torc_sequential_append(model, torc_module_build("relu", NULL)));
  CHECK(torc_sequential_append(model, torc_linear_new(256, 128, 1)));
  CHECK(torc_sequential_append(model, torc_module_build("relu", NULL)));
  CHECK(torc_sequential_append(model, torc_linear_new(128, 10, 1)));

  torc_loss *criterion = torc_loss_build("cross_entropy", NULL);
  torc_optimizer *opt = torc_optimizer_build(
      "sgd", "lr=0.05, momentum=0.9, nesterov=yes", model);
  NEED(criterion);
  NEED(opt);

  double accuracy = 0;
  for (int epoch = 0; epoch < epochs; epoch++) {
    /* model.train(); for x, y in loader: ... */
    torc_module_train(model, 1);
    CHECK(torc_loader_start(train_ld, epoch, 0));
    torc_batch b = {0};
    int64_t seen = 0;
    double loss_sum = 0;
    while ((limit == 0 || seen < limit) && torc_loader_next(train_ld, &b) == 1) {
      int scope = torc_scope_begin(); /* frees this step's tensors */
      torc_tensor *loss =
          torc_loss_forward(criterion, torc_module_forward(model, b.input),
                            b.target);
      double v;
      CHECK(torc_item(loss, &v));
      CHECK(torc_optimizer_zero_grad(opt, 1));
      CHECK(torc_backward(loss, NULL, 0));
      CHECK(torc_optimizer_step(opt));
      torc_scope_end(scope);
      loss_sum += v * (double)b.size;
      seen += b.size;
      torc_batch_clear(&b);
    }
    torc_batch_clear(&b);

    /* model.eval(); with torch.inference_mode(): model(x) — in one call,
     * torc_module_predict, which leaves the model's mode as it is and runs
     * a plan traced at the first batch of each shape (fused layers, no
     * allocation but the result), planned again after each epoch's steps
     * changed the weights. */
    CHECK(torc_loader_start(test_ld, 0, 0));
    double correct = 0;
    int64_t n = 0;
    while ((test_limit == 0 || n < test_limit) &&
           torc_loader_next(test_ld, &b) == 1) {
      int scope = torc_scope_begin();
      int dim = 1;
      torc_tensor *pred =
          torc_argmax(torc_module_predict(model, b.input), &dim, 0);
      double c;
      CHECK(torc_item(torc_sum(torc_eq(pred, b.target), NULL, 0, 0), &c));
      correct += c;
      n += b.size;
      torc_scope_end(scope);
      torc_batch_clear(&b);
    }
    accuracy = correct / (double)n;
    printf("epoch %d: train loss %.4f, test accuracy %.4f\n", epoch + 1,
           loss_sum / (double)seen, accuracy);
  }

  torc_optimizer_free(opt);
  torc_loss_free(criterion);
  torc_module_free(model);
  torc_loader_free(train_ld);
  torc_loader_free(test_ld);
  torc_transform_free(normalise);
  torc_dataset_close(train);
  torc_dataset_close(test);
  torc_shutdown();
  /* Under make check (a short run) the model must have learnt something. */
  if (limit > 0 && accuracy < min_accuracy) {
    fprintf(stderr, "train_mlp: test accuracy %.4f is below %.2f\n", accuracy,
            min_accuracy);
    return 1;
  }
  return 0;
}
