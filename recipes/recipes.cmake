# The recipes library: the built-in registry (components, schemas, estimates), the shared training loop
# (trainer.cc) and the recipes, one file each.
add_library(tm_recipes
  adamw8bit.cc
  builtin.cc
  checkpointers.cc
  components.cc
  distillation.cc
  dpo.cc
  eleuther_eval.cc
  eval_tasks.cc
  estimate.cc
  finetune.cc
  qat.cc
  trainer.cc
  flops.cc
  first_step_probe.cc
  op_profile.cc
  generate.cc
  quantize.cc
  loss.cc
  model_components.cc
  optimizer_in_backward.cc
  optimizers.cc
  parallelism.cc
  ppo.cc
  ppo_recipe.cc
  run_progress.cc
  state_values.cc
  tokenize_cli.cc
  train_schema.cc
  train_setup.cc
  train_state.cc
  vision_components.cc
  vision_training.cc
)
target_include_directories(tm_recipes PUBLIC "${PROJECT_SOURCE_DIR}")
target_link_libraries(tm_recipes PUBLIC tm_harness tm_models tm_data tm_checkpoint tm_distributed)
tm_use_torch(tm_recipes)
tm_cpu_kernels(tm_recipes loss.cc adamw8bit.cc)  # the loss's and the 8-bit step's one-pass CPU loops, like the models'
# The 8-bit step's square roots vectorise only where they need not set errno (its arguments are never negative).
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set_property(SOURCE adamw8bit.cc APPEND PROPERTY COMPILE_OPTIONS -fno-math-errno)
endif()

add_executable(tune tune_main.cc)
target_link_libraries(tune PRIVATE tm_recipes)
tm_training_allocator(tune)  # jemalloc where installed (cmake/TuneMatrixTargets.cmake)
tm_device_plugin_host(tune)  # loads --device-plugin libraries (harness/device_plugin.h)

tm_add_test(recipes_finetune_test SOURCES finetune_test.cc LIBS tm_recipes TORCH LABELS recipes)
tm_add_test(recipes_first_step_probe_test SOURCES first_step_probe_test.cc LIBS tm_recipes TORCH LABELS recipes)
tm_add_test(recipes_qat_test SOURCES qat_test.cc LIBS tm_recipes TORCH LABELS recipes)
tm_add_test(recipes_quantize_test SOURCES quantize_test.cc LIBS tm_recipes TORCH LABELS recipes)
tm_add_test(recipes_distributed_test SOURCES distributed_recipes_test.cc LIBS tm_recipes tm_process TORCH
            LABELS recipes)
if(TUNE_MATRIX_BUILD_TESTS)
  target_compile_definitions(recipes_distributed_test PRIVATE TM_TUNE_PATH="$<TARGET_FILE:tune>")
  add_dependencies(recipes_distributed_test tune)
endif()
tm_add_test(recipes_generate_test SOURCES generate_test.cc LIBS tm_recipes TORCH LABELS recipes)
tm_add_test(recipes_eleuther_eval_test SOURCES eleuther_eval_test.cc eval_tasks_test.cc
            "${PROJECT_SOURCE_DIR}/tests/cli_exec.cc" LIBS tm_recipes TORCH LABELS recipes)
if(TUNE_MATRIX_BUILD_TESTS)
  add_dependencies(recipes_eleuther_eval_test tune)
endif()
tm_add_test(recipes_tokenize_cli_test SOURCES tokenize_cli_test.cc LIBS tm_recipes TORCH LABELS recipes)
tm_add_test(recipes_builtin_test SOURCES builtin_test.cc model_components_test.cc estimate_test.cc optimizers_test.cc
            optimizer_in_backward_test.cc loss_test.cc flops_test.cc op_profile_test.cc
            run_progress_test.cc train_setup_test.cc vision_components_test.cc
            LIBS tm_recipes TORCH LABELS recipes)
tm_add_test(recipes_adamw8bit_test SOURCES adamw8bit_test.cc state_values_test.cc LIBS tm_recipes TORCH LABELS recipes)
tm_add_test(recipes_ppo_test SOURCES ppo_test.cc ppo_recipe_test.cc LIBS tm_recipes TORCH LABELS recipes)
tm_add_test(recipes_vision_training_test SOURCES vision_training_test.cc LIBS tm_recipes TORCH LABELS recipes)
