/* tests/test_eval_report.c — torc_eval_report on hand-made confusion
 * matrices: the matrix labelled with the classes' indices and names, and
 * the classification report's per-class precision, recall, F1 and support
 * with accuracy (or micro average), macro and weighted averages, as
 * scikit-learn's classification_report prints them (digits=4,
 * zero_division=0). The expected figures are worked out by hand below.
 */
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

/* The report of res as a malloc'd string. */
static char *report(const torc_eval_result *res) {
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  assert_ok(torc_eval_report(res, out));
  fclose(out);
  return text;
}

/* scikit-learn's documented example: y_true = [0, 1, 2, 2, 2], y_pred =
 * [0, 0, 2, 2, 1], target_names 'class 0'..'class 2', whose report (at 2
 * digits) reads 0.50 1.00 0.67 | 0.00 0.00 0.00 | 1.00 0.67 0.80,
 * accuracy 0.60, macro 0.50 0.56 0.49, weighted 0.70 0.60 0.61.
 * By hand, at 4 digits:
 *   class 0: tp 1, predicted 2, support 1: P 1/2, R 1, F1 2/3
 *   class 1: tp 0, predicted 1, support 1: P 0, R 0, F1 0
 *   class 2: tp 2, predicted 2, support 3: P 1, R 2/3, F1 4/5
 *   accuracy 3/5; macro P 1.5/3 = 0.5, R (5/3)/3 = 0.5556,
 *   F1 (22/15)/3 = 0.4889; weighted P (1/2 + 0 + 3)/5 = 0.7,
 *   R (1 + 0 + 2)/5 = 0.6, F1 (2/3 + 0 + 12/5)/5 = 0.6133. */
static void test_sklearn_example(void **state) {
  (void)state;
  int64_t cm[9] = {1, 0, 0, /* true 0 */
                   1, 0, 0, /* true 1 */
                   0, 1, 2}; /* true 2 */
  char *names[] = {"class 0", "class 1", "class 2", NULL};
  torc_eval_result res = {.classes = 3, .confusion = cm,
                          .class_names = names, .samples = 5};
  char *text = report(&res);
  assert_string_equal(
      text,
      "confusion matrix (rows: true class, columns: predicted):\n"
      "               0      1      2\n"
      "0 class 0      1      0      0\n"
      "1 class 1      1      0      0\n"
      "2 class 2      0      1      2\n"
      "\n"
      "              precision    recall  f1-score   support\n"
      "\n"
      "     class 0     0.5000    1.0000    0.6667         1\n"
      "     class 1     0.0000    0.0000    0.0000         1\n"
      "     class 2     1.0000    0.6667    0.8000         3\n"
      "\n"
      "    accuracy                         0.6000         5\n"
      "   macro avg     0.5000    0.5556    0.4889         5\n"
      "weighted avg     0.7000    0.6000    0.6133         5\n");
  free(text);
}

/* A class with neither samples nor predictions: scikit-learn (labels =
 * every class) prints "micro avg" instead of "accuracy", and the class
 * counts 0 in the macro average. y_true = [0, 0, 1, 1], y_pred = [0, 1,
 * 1, 1], classes 0..2, no names (the indices label them), by hand:
 *   class 0: tp 1, predicted 1, support 2: P 1, R 1/2, F1 2/3
 *   class 1: tp 2, predicted 3, support 2: P 2/3, R 1, F1 4/5
 *   class 2: nothing: 0, 0, 0, support 0
 *   micro 3/4 each; macro P (5/3)/3 = 0.5556, R 1.5/3 = 0.5,
 *   F1 (22/15)/3 = 0.4889; weighted P (2 + 4/3)/4 = 0.8333,
 *   R (1 + 2)/4 = 0.75, F1 (4/3 + 8/5)/4 = 0.7333. */
static void test_absent_class_micro(void **state) {
  (void)state;
  int64_t cm[9] = {1, 1, 0, 0, 2, 0, 0, 0, 0};
  torc_eval_result res = {.classes = 3, .confusion = cm, .samples = 4};
  char *text = report(&res);
  assert_string_equal(
      text,
      "confusion matrix (rows: true class, columns: predicted):\n"
      "       0      1      2\n"
      "0      1      1      0\n"
      "1      0      2      0\n"
      "2      0      0      0\n"
      "\n"
      "              precision    recall  f1-score   support\n"
      "\n"
      "           0     1.0000    0.5000    0.6667         2\n"
      "           1     0.6667    1.0000    0.8000         2\n"
      "           2     0.0000    0.0000    0.0000         0\n"
      "\n"
      "   micro avg     0.7500    0.7500    0.7500         4\n"
      "   macro avg     0.5556    0.5000    0.4889         4\n"
      "weighted avg     0.8333    0.7500    0.7333         4\n");
  free(text);
}

/* A name longer than "weighted avg" widens the first column, right-
 * aligned as scikit-learn does; counts wider than 6 digits widen the
 * matrix's columns. Two classes, all right: every figure 1. */
static void test_widths(void **state) {
  (void)state;
  int64_t cm[4] = {1234567, 0, 0, 3};
  char *names[] = {"a rather long name", "b", NULL};
  torc_eval_result res = {.classes = 2, .confusion = cm,
                          .class_names = names};
  char *text = report(&res);
  assert_string_equal(
      text,
      "confusion matrix (rows: true class, columns: predicted):\n"
      "                           0       1\n"
      "0 a rather long name 1234567       0\n"
      "1 b                        0       3\n"
      "\n"
      "                    precision    recall  f1-score   support\n"
      "\n"
      "a rather long name     1.0000    1.0000    1.0000   1234567\n"
      "                 b     1.0000    1.0000    1.0000         3\n"
      "\n"
      "          accuracy                         1.0000   1234570\n"
      "         macro avg     1.0000    1.0000    1.0000   1234570\n"
      "      weighted avg     1.0000    1.0000    1.0000   1234570\n");
  free(text);
}

/* Regression (no matrix): nothing printed; NULL: TORC_ERR_NULL. */
static void test_nothing_to_report(void **state) {
  (void)state;
  torc_eval_result res = {.classes = 0, .confusion = NULL};
  char *text = report(&res);
  assert_string_equal(text, "");
  free(text);
  assert_int_equal(torc_eval_report(NULL, stdout), TORC_ERR_NULL);
  torc_clear_error();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sklearn_example),
      cmocka_unit_test(test_absent_class_micro),
      cmocka_unit_test(test_widths),
      cmocka_unit_test(test_nothing_to_report),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
