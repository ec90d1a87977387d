//! `vm::alloc_count::Reserve` as the global allocator, over `Failing`: an
//! injected allocation failure inside a compile section (`vm::oom`) is
//! served from the reserve and fails the section; inside a bypass it is
//! `try_reserve`'s error, as outside sections.

#[global_allocator]
static GLOBAL: vm::alloc_count::Reserve<vm::alloc_count::Failing> =
    vm::alloc_count::Reserve::new(vm::alloc_count::Failing);

use vm::alloc_count::{arm_failure, disarm_failure, reserve_in_use, reserve_served};
use vm::oom::{bypass, failed, section, OutOfMemory};

/// One test: the reserve's counts are the process's.
#[test]
fn a_failure_in_a_section_is_an_error_and_a_bypass_sees_it() {
    // The next allocation of at least 1000 bytes fails, in a section: the
    // work goes on (the vector is whole), the section reports it.
    let served = reserve_served();
    let r = section(|| {
        arm_failure(1, 1000);
        let mut v = vec![7u8; 4000];
        let (_, injected) = disarm_failure();
        assert!(injected && failed());
        assert_eq!(reserve_in_use().0, 1, "the vector is the reserve's");
        // Growing it moves it out of the reserve.
        v.resize(8000, 7);
        assert_eq!(reserve_in_use(), (0, 0));
        v.iter().map(|b| u64::from(*b)).sum::<u64>()
    });
    assert_eq!(r, Err(OutOfMemory));
    assert_eq!(reserve_served(), served + 1);
    assert!(!failed());

    // In a bypass: `try_reserve`'s error, the section not failed.
    let r = section(|| {
        let mut v: Vec<u8> = Vec::new();
        arm_failure(1, 1000);
        let grown = bypass(|| v.try_reserve_exact(4000));
        disarm_failure();
        assert!(grown.is_err());
        assert!(!failed());
        v.capacity()
    });
    assert_eq!(r, Ok(0));
    assert_eq!(reserve_served(), served + 1);

    // Outside sections `try_reserve` sees the failure too.
    let mut v: Vec<u8> = Vec::new();
    arm_failure(1, 1000);
    let grown = v.try_reserve_exact(4000);
    disarm_failure();
    assert!(grown.is_err());

    // What the reserve holds when the section ends is dropped with the
    // section's value: the region is reset.
    let r = section(|| {
        arm_failure(1, 1000);
        let v = vec![1u8; 2000];
        disarm_failure();
        v
    });
    assert_eq!(r, Err(OutOfMemory));
    assert_eq!(reserve_in_use(), (0, 0));
}
