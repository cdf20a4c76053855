/* empty.c: a C program that does nothing: what loading the allocator costs a process, in
 * peak RSS, before the program asks for anything. Prints "all checked" like the other
 * programs (stdio's buffer is its one allocation). */
#include <stdio.h>

int main(void) {
  puts("all checked");
  return 0;
}
