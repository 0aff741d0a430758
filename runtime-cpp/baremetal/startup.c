/* Start-up for the bare-metal runner on Arm's MPS3 AN547 board (Cortex-M55), as QEMU's mps3-an547 machine
 * emulates it: the vector table (reset and fault handlers), the heap newlib's malloc grows into, and the
 * count of heap allocations main.cpp reports.
 *
 * Reset_Handler enables the FPU and hands over to newlib's _start (crt0 from rdimon.specs), which clears .bss, sets up
 * semihosting (stdin/stdout/stderr on the host), runs the global constructors and calls main().
 * A fault prints its number through semihosting and stops with exit status 4. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern uint32_t __stack_top; /* linker script: top of RAM */
extern char end;             /* first byte after .bss: where the heap starts */
extern char __heap_limit;    /* the heap stops here, below the stack */
extern void _start(void);

/* Coprocessor Access Control Register of the System Control Block (Armv8-M). */
#define ETKIT_SCB_CPACR (*(volatile uint32_t*)0xE000ED88u)

void Reset_Handler(void) {
  /* The FPU and Helium (MVE) are coprocessors 10 and 11, off at reset: give full access before any code
   * built for the hard-float ABI runs (else its first floating-point instruction faults, NOCP). */
  ETKIT_SCB_CPACR |= (3u << 20) | (3u << 22);
  __asm volatile("dsb\n\tisb" ::: "memory");
  _start();
}

static void fault(int number) {
  printf("etkit-status error CPU fault (exception %d)\n", number);
  exit(4);
}
void NMI_Handler(void) { fault(2); }
void HardFault_Handler(void) { fault(3); }
void MemManage_Handler(void) { fault(4); }
void BusFault_Handler(void) { fault(5); }
void UsageFault_Handler(void) { fault(6); }
void SecureFault_Handler(void) { fault(7); }
void Default_Handler(void) { fault(0); }

/* ARMv8-M vector table: initial stack pointer, then the system exceptions 1..15 (no device interrupts). */
__attribute__((section(".vectors"), used)) void (*const etkit_vectors[16])(void) = {
    (void (*)(void))(&__stack_top), Reset_Handler, NMI_Handler, HardFault_Handler, MemManage_Handler,
    BusFault_Handler, UsageFault_Handler, SecureFault_Handler, 0, 0, 0, Default_Handler /* SVCall */,
    Default_Handler /* DebugMonitor */, 0, Default_Handler /* PendSV */, Default_Handler /* SysTick */};

/* newlib's malloc asks _sbrk for memory; rdimon's own _sbrk asks the host, which QEMU answers with nothing,
 * so the heap is the RAM the linker script leaves between .bss and the stack. */
void* _sbrk(ptrdiff_t increment) {
  static char* brk = &end;
  if (increment < 0 || (size_t)(&__heap_limit - brk) < (size_t)increment) {
    errno = ENOMEM;
    return (void*)-1;
  }
  char* old = brk;
  brk += increment;
  return old;
}

/* Every heap allocation the program makes (the linker wraps these with --wrap=<name>). */
static size_t heap_allocations;
size_t etkit_heap_allocations(void) { return heap_allocations; }

void* __real_malloc(size_t);
void* __real_calloc(size_t, size_t);
void* __real_realloc(void*, size_t);
void* __real_aligned_alloc(size_t, size_t);
void* __real_memalign(size_t, size_t);
/* newlib 3.3's aligned_alloc (what the runtime's aligned allocations call) calls posix_memalign, which the
 * library itself does not define: the port supplies it. */
int posix_memalign(void** out, size_t alignment, size_t n) {
  void* p = __real_memalign(alignment, n);
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}

void* __wrap_malloc(size_t n) { ++heap_allocations; return __real_malloc(n); }
void* __wrap_calloc(size_t a, size_t b) { ++heap_allocations; return __real_calloc(a, b); }
void* __wrap_realloc(void* p, size_t n) { ++heap_allocations; return __real_realloc(p, n); }
void* __wrap_aligned_alloc(size_t a, size_t n) { ++heap_allocations; return __real_aligned_alloc(a, n); }
void* __wrap_memalign(size_t a, size_t n) { ++heap_allocations; return __real_memalign(a, n); }

/* newlib as Debian builds it knows no C99 length modifiers: "%zu" prints "zu". The runtime's messages
 * (error.cpp, platform.cpp) format sizes with %zu through vsnprintf, so the image wraps it and drops the 'z'
 * before the conversion: size_t is unsigned int on this ABI, which %u reads alike. */
int __real_vsnprintf(char* out, size_t n, const char* format, va_list args);
int __wrap_vsnprintf(char* out, size_t n, const char* format, va_list args) {
  char plain[512];
  size_t j = 0;
  int in_conversion = 0; /* between a '%' and its conversion letter */
  for (const char* p = format; *p != '\0'; ++p) {
    if (j + 2 >= sizeof(plain)) return __real_vsnprintf(out, n, format, args); /* too long: as it is */
    if (!in_conversion) {
      if (*p == '%' && p[1] == '%') {
        plain[j++] = *p++; /* "%%": a literal percent sign */
      } else if (*p == '%') {
        in_conversion = 1;
      }
    } else if (*p == 'z') {
      continue;
    } else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) {
      in_conversion = *p == 'l' || *p == 'h' || *p == 'j' || *p == 't' || *p == 'L';
    }
    plain[j++] = *p;
  }
  plain[j] = '\0';
  return __real_vsnprintf(out, n, plain, args);
}
