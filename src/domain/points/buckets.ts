/*
 * Stock bucketing (POINTS_SHOP_BUCKETS, docs/scaling.md "Hot campaigns across shards").
 * The shop is split into N buckets, each its own hash tag and so its own cluster slot.
 * A user belongs to one bucket, by a hash of the user id: their balance, their
 * per-user counts and their remembered answers live there. A goods item has keys in
 * every bucket, each with a share of its stock (goods_bucket_stock), so a redemption
 * still runs one script on one slot. A bucket that runs dry takes stock from another
 * (stockTransfers.ts). Bucket 0 keeps the tag `{shop}`, so with one bucket (the
 * default) every key is what it was before buckets existed.
 */

/** The hash tag of a bucket's keys. */
export const bucketTag = (bucket: number) => (bucket === 0 ? '{shop}' : `{shop:${bucket}}`);

/**
 * The bucket a user's balance and counts live in: FNV-1a of the id, so every instance
 * agrees without asking, then murmur3's finalizer: FNV-1a's low bits depend only on the
 * low bits of the characters, which would sort ids like `user-1`, `user-2` … unevenly.
 */
export function bucketOf(userId: string, buckets: number): number {
  if (buckets === 1) return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < userId.length; i++) {
    hash ^= userId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return (hash >>> 0) % buckets;
}

/** A goods item's initial share in a bucket: the stock dealt evenly, the first buckets one more. */
export const initialShare = (stock: number, bucket: number, buckets: number) => Math.floor(stock / buckets) + (bucket < stock % buckets ? 1 : 0);

/** Every bucket's number, 0 … buckets − 1. */
export const allBuckets = (buckets: number) => Array.from({ length: buckets }, (_, bucket) => bucket);
