use std::cell::RefCell;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use super::{Derivations, DERIVE_SLICE};
use crate::protocol::pg::{Derivation, ScramSecret};
use crate::rt;

const ROUNDS: u32 = 4096;
const PASSWORDS: [&str; 4] = ["one", "two", "three", "four"];

/// What a run of [`derive_all`] saw: each login's password, verifier and the loop turn it
/// finished in, in the order they finished.
type Finished = Vec<(&'static str, ScramSecret, u64)>;

/// Starts a login per password at once on a core of their own (and one whose client leaves
/// at once), beside a request that is always ready, and returns what finished.
fn derive_all() -> Finished {
    let (tx, rx) = mpsc::channel();
    let core = rt::spawn_core("derive-test", None, move |queues| async move {
        let derivations = Derivations::new(queues.background);
        let finished: Rc<RefCell<Finished>> = Rc::default();
        let all_done = rt::Event::new();
        let spin = all_done.clone();
        rt::spawn_guarded(
            queues.latency,
            async move {
                while !spin.is_set() {
                    rt::yield_now().await;
                }
            },
            |_| {},
        );
        let gone = derivations.clone();
        let leaving = Derivation::new("left", b"salt", ROUNDS).expect("HMAC takes any key");
        let _ = rt::with_deadline(rt::now(), gone.run(leaving)).await;
        for password in PASSWORDS {
            let (derivations, finished, all_done) = (derivations.clone(), finished.clone(), all_done.clone());
            let login = async move {
                let work = Derivation::new(password, b"salt", ROUNDS).expect("HMAC takes any key");
                let secret = derivations.run(work).await;
                finished.borrow_mut().push((password, secret, rt::turn()));
                if finished.borrow().len() == PASSWORDS.len() {
                    all_done.set();
                }
            };
            rt::spawn_guarded(queues.latency, login, |_| {});
        }
        all_done.wait().await;
        let _ = tx.send(std::mem::take(&mut *finished.borrow_mut()));
    })
    .expect("core starts");
    let out = rx.recv_timeout(Duration::from_secs(30)).expect("the core answers in time");
    core.join().expect("the core ends cleanly");
    out
}

#[test]
fn logins_derive_in_arrival_order_one_slice_per_turn_beside_a_busy_request() {
    let finished = derive_all();
    let order: Vec<&str> = finished.iter().map(|(p, _, _)| *p).collect();
    assert_eq!(order, PASSWORDS, "first come, first served");
    for (password, secret, _) in &finished {
        assert_eq!(*secret, ScramSecret::from_password(password, b"salt", ROUNDS), "{password}'s verifier");
    }
    // Each derivation takes this many slices, and a turn runs at most one: consecutive
    // logins finish at least that many turns apart.
    let slices = u64::from((ROUNDS - 1).div_ceil(DERIVE_SLICE));
    for pair in finished.windows(2) {
        assert!(
            pair[1].2 - pair[0].2 >= slices,
            "turns {} and {}: more than one slice in a turn",
            pair[0].2,
            pair[1].2
        );
    }
}
