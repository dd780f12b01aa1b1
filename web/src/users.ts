/** Others are opaque aliases ("u_" and 16 characters): a short handle reads better, `word` and the last four. */
export const handle = (userId: string, word: string) => (/^u_[\w-]{16}$/.test(userId) ? `${word} ${userId.slice(-4)}` : userId);
