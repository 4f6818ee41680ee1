//! No call destroys a job whose id or topic is not UTF-8 (issue 20, item
//! 11). Delayer 1.x and PHP clients write any bytes; the SDK hands such a job
//! out whole (`raw_id` / `raw_topic` hold the exact bytes, `id` a lossy
//! rendering), and takes it back by those bytes: ack, touch, release, bury
//! (the job carries them), dead letters, lookups, listings and removal by
//! raw id. Jobs are written with raw commands, in both key layouts.

use delayer::worker::{Task, Worker};
use delayer::{Delayer, JobRef, Layout};
use redis::Commands;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use testkit::RedisServer;

const ID: &[u8] = b"order-\xe9-\x80-\xe2\x82";
const BODY: &[u8] = b"\xff\xfe body";

struct Plant {
    conn: redis::Connection,
    layout: Layout,
}

impl Plant {
    fn prefix(&self) -> &'static [u8] {
        if self.layout == Layout::Topic {
            b"u:"
        } else {
            b"delayer:"
        }
    }

    fn key(&self, topic: &[u8], kind: &str) -> Vec<u8> {
        if self.layout == Layout::Topic {
            return [self.prefix(), b"{", topic, b"}:", kind.as_bytes()].concat();
        }
        match kind {
            "pool" => b"delayer:job_pool".to_vec(),
            "reserved" => b"delayer:reserved".to_vec(),
            "ready" => [b"delayer:ready_queue:".as_slice(), topic].concat(),
            _ => [b"delayer:dead:".as_slice(), topic].concat(),
        }
    }

    fn bucket(&self, topic: &[u8], id: &[u8]) -> Vec<u8> {
        if self.layout == Layout::Topic {
            return [self.key(topic, "job:").as_slice(), id].concat();
        }
        [b"delayer:job_bucket:".as_slice(), id].concat()
    }

    /// A job due now, in its ready queue, written byte for byte.
    fn ready(&mut self, topic: &[u8], id: &[u8]) {
        let bucket = self.bucket(topic, id);
        let _: () = self.conn.hset_multiple(bucket, &[(b"topic".as_slice(), topic), (b"body", BODY)]).expect("hset");
        let _: () = self.conn.lpush(self.key(topic, "ready"), id).expect("lpush");
    }

    /// The server's part for a waiting job: from the pool to its ready queue.
    fn make_ready(&mut self, topic: &[u8], id: &[u8]) {
        let removed: i64 = self.conn.zrem(self.key(topic, "pool"), id).expect("zrem");
        assert_eq!(removed, 1, "not waiting");
        let _: () = self.conn.lpush(self.key(topic, "ready"), id).expect("lpush");
    }

    fn gone(&mut self, topic: &[u8], id: &[u8]) -> bool {
        let bucket: bool = self.conn.exists(self.bucket(topic, id)).expect("exists");
        let reserved: Option<f64> = self.conn.zscore(self.key(topic, "reserved"), id).expect("zscore");
        let waiting: Option<f64> = self.conn.zscore(self.key(topic, "pool"), id).expect("zscore");
        let dead: Vec<Vec<u8>> = self.conn.lrange(self.key(topic, "dead"), 0, -1).expect("lrange");
        !bucket && reserved.is_none() && waiting.is_none() && dead.is_empty()
    }
}

fn setup(redis: &RedisServer, layout: Layout) -> (Plant, Delayer) {
    let prefix = if layout == Layout::Topic { "u:" } else { "delayer:" };
    let d = Delayer::open(&redis.url()).expect("client").with_prefix(prefix).with_layout(layout).expect("layout");
    (Plant { conn: redis.connection(), layout }, d)
}

fn each_layout(test: impl Fn(Plant, Delayer)) {
    let redis = RedisServer::start();
    for layout in [Layout::Classic, Layout::Topic] {
        let (plant, d) = setup(&redis, layout);
        test(plant, d);
    }
}

#[test]
fn pop_and_bpop_hand_out_the_job_and_the_next_one() {
    each_layout(|mut plant, d| {
        plant.ready(b"t", ID);
        plant.ready(b"t", b"second-\xff");
        plant.ready(b"t", b"good");
        let job = d.pop("t").expect("pop").expect("a job");
        assert_eq!((job.id_bytes(), job.topic_bytes(), job.body.as_slice()), (ID, b"t".as_slice(), BODY));
        assert_eq!(job.id, String::from_utf8_lossy(ID));
        let second = d.bpop("t", Duration::from_secs(5)).expect("bpop").expect("a job");
        assert_eq!(second.raw_id.as_deref(), Some(b"second-\xff".as_slice()));
        assert_eq!(d.pop("t").expect("pop").expect("a job").id, "good");
        assert!(plant.gone(b"t", ID));
    });
}

#[test]
fn a_reserved_job_is_ended_by_what_it_carries_and_its_dead_letter_by_its_bytes() {
    each_layout(|mut plant, d| {
        plant.ready(b"t", ID);
        let job = d.reserve("t", Duration::from_secs(30)).expect("reserve").expect("a job");
        assert_eq!(job.id_bytes(), ID);
        assert!(d.touch(&job, Duration::from_secs(60)).expect("touch").is_some());
        let listed = d.list_reserved_with_deadlines("t", 0, 10).expect("list");
        assert_eq!(listed.items.iter().map(|l| l.id_bytes()).collect::<Vec<_>>(), [ID]);
        assert_eq!(d.job_raw("t", ID).expect("job").state, delayer::inspect::JobState::Reserved);
        assert!(d.release(&job, Some(Duration::ZERO)).expect("release"));
        plant.make_ready(b"t", ID);
        let again = d.breserve("t", Duration::from_secs(30), Duration::from_secs(5)).expect("breserve").expect("job");
        assert!(d.bury(&again).expect("bury"));
        let dead = d.dead_letters("t", 0, 10).expect("dead letters");
        assert_eq!(dead.iter().map(|x| x.id_bytes()).collect::<Vec<_>>(), [ID]);
        assert_eq!(d.requeue_dead_raw("t", &[ID]).expect("requeue"), 1);
        plant.make_ready(b"t", ID);
        let (_, jobs) = d.reserve_many("t", Duration::from_secs(30), 5, &[]).expect("reserve_many");
        assert_eq!(jobs.iter().map(|j| j.id_bytes()).collect::<Vec<_>>(), [ID]);
        let refs: Vec<JobRef<'_>> = jobs.iter().map(JobRef::from).collect();
        let (acked, _) = d.reserve_many("t", Duration::from_secs(30), 0, &refs).expect("ack");
        assert_eq!(acked, [true]);
        assert!(plant.gone(b"t", ID));
        // A dead letter purged by its bytes; an id alone, by JobRef::raw.
        plant.ready(b"t", ID);
        let job = d.reserve("t", Duration::from_secs(30)).expect("reserve").expect("a job");
        assert!(d.bury(JobRef::raw(ID).receipt(&job.receipt).in_topic("t")).expect("bury by raw id"));
        assert_eq!(d.purge_dead_raw("t", &[ID]).expect("purge"), 1);
        assert!(plant.gone(b"t", ID));
    });
}

#[test]
fn a_waiting_job_is_listed_looked_up_and_removed_by_its_bytes() {
    each_layout(|mut plant, d| {
        plant.ready(b"t", b"ready-\xff");
        assert_eq!(d.list_ready_raw("t", 0, 10).expect("ready").items, [b"ready-\xff".to_vec()]);
        let bucket = plant.bucket(b"t", ID);
        let _: () =
            plant.conn.hset_multiple(bucket, &[(b"topic".as_slice(), b"t".as_slice()), (b"body", BODY)]).expect("hset");
        let _: () = plant.conn.zadd(plant.key(b"t", "pool"), ID, 4_000_000_000u64).expect("zadd");
        let page = d.list_scheduled("t", 0, 10).expect("list");
        assert_eq!(page.items.iter().map(|l| l.id_bytes()).collect::<Vec<_>>(), [ID]);
        let info = d.job_raw("t", page.items[0].id_bytes()).expect("job");
        assert_eq!((info.state, info.raw_id.as_deref()), (delayer::inspect::JobState::Scheduled, Some(ID)));
        assert!(d.remove_in_raw("t", ID).expect("remove"));
        assert!(plant.gone(b"t", ID));
    });
}

#[test]
fn a_worker_runs_and_acks_them() {
    each_layout(|mut plant, d| {
        let ids: Vec<Vec<u8>> = (0x80u8..0x83).map(|b| [ID, &[b]].concat()).collect();
        for id in &ids {
            plant.ready(b"t", id);
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let worker = Worker::new(d.clone()).concurrency(2).handle("t", move |job: &Task| {
            record.lock().expect("lock").push(job.id_bytes().to_vec());
            Ok::<(), std::io::Error>(())
        });
        let stopper = worker.stopper();
        let running = std::thread::spawn(move || worker.run());
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ids.iter().all(|id| plant.gone(b"t", id)) {
            assert!(Instant::now() < deadline, "the jobs were not all acked");
            std::thread::sleep(Duration::from_millis(10));
        }
        stopper.stop();
        running.join().expect("join").expect("run");
        let mut seen = seen.lock().expect("lock").clone();
        seen.sort();
        assert_eq!(seen, ids);
    });
}
